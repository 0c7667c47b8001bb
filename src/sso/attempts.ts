import { and, eq, gt } from "drizzle-orm";
import { opaqueToken, tokenHash } from "../auth/opaque-tokens.ts";
import type { Ctx, TenantCtx } from "../context.ts";
import { withTenantOrPlatformDatabase, withTransaction } from "../db/operation.ts";
import { ssoConnections, ssoSignInAttempts } from "../db/schema/sso.ts";
import type { SsoConnectionRow } from "./connection-types.ts";
import type { SsoDeps } from "./sso-deps.ts";

/** How long a sign-in may stay at the provider before its callback is refused. */
export const ATTEMPT_MINUTES = 10;

export type SsoAttempt = typeof ssoSignInAttempts.$inferSelect;

/** A fresh `state` and its attempt row, stored by hash; `data` is filled by the connection type's `start`. */
export async function createSsoAttempt(
  deps: SsoDeps,
  ctx: TenantCtx,
  input: {
    connection: SsoConnectionRow;
    returnTo: string;
    test: boolean;
    /** The SHA-256 of the browser-binding cookie's value (browser-binding.ts). */
    browserBinding: string;
    start: (state: string) => Promise<{ redirectUrl: string; data: Record<string, string> }>;
  },
): Promise<{ redirectUrl: string; attemptId: string }> {
  const state = opaqueToken(32);
  const started = await input.start(state);
  const now = deps.clock.now();
  const [row] = await withTransaction(deps, ctx, (tx) =>
    tx
      .insert(ssoSignInAttempts)
      .values({
        tenantId: ctx.tenantId,
        connectionId: input.connection.id,
        stateHash: tokenHash(state),
        returnTo: input.returnTo,
        test: input.test,
        data: { ...started.data, browser: input.browserBinding },
        createdAt: now,
        expiresAt: new Date(now.getTime() + ATTEMPT_MINUTES * 60_000),
      })
      .returning({ id: ssoSignInAttempts.id }),
  );
  if (!row) throw new Error("the sign-in attempt insert returned no row");
  return { redirectUrl: started.redirectUrl, attemptId: row.id };
}

/**
 * The attempt a callback's `state` names, with its connection, spent as it is read (deleted): a
 * callback is accepted once. Null for an unknown, spent or expired state. `expect`: the connection
 * type the callback speaks (an OIDC state at the SAML endpoint is unknown there).
 */
export async function takeSsoAttempt(
  deps: SsoDeps,
  ctx: Ctx,
  input: { state: string; type: SsoConnectionRow["type"] },
): Promise<{ attempt: SsoAttempt; connection: SsoConnectionRow } | null> {
  const now = deps.clock.now();
  // no tenant is known before the state is read: the lookup is by its unguessable hash alone (a
  // named platform lookup on the platform host; in the request tenant's context on its own host)
  const [attempt] = await withTenantOrPlatformDatabase(deps, ctx, ctx.tenantId, (db) =>
    db
      .delete(ssoSignInAttempts)
      .where(
        and(eq(ssoSignInAttempts.stateHash, tokenHash(input.state)), gt(ssoSignInAttempts.expiresAt, now)),
      )
      .returning(),
  );
  if (!attempt) return null;
  // the connection in the attempt's tenant's context
  const [connection] = await withTenantOrPlatformDatabase(deps, ctx, attempt.tenantId, (db) =>
    db
      .select()
      .from(ssoConnections)
      .where(
        and(
          eq(ssoConnections.id, attempt.connectionId),
          eq(ssoConnections.tenantId, attempt.tenantId),
          eq(ssoConnections.type, input.type),
        ),
      ),
  );
  return connection ? { attempt, connection } : null;
}
