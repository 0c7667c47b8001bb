import { and, eq, gt, isNull } from "drizzle-orm";
import { type BrowserSignIn, startBrowserSession } from "../auth/browser-sessions.ts";
import { tokenHash } from "../auth/opaque-tokens.ts";
import { invalidCredentials, type SignIn, startTokenSession, type TokenPair } from "../auth/sessions.ts";
import { loadIdentity } from "../auth/user-identity.ts";
import type { Ctx } from "../context.ts";
import { withTenantOrPlatformDatabase } from "../db/operation.ts";
import { ssoSignInCodes } from "../db/schema/sso.ts";
import type { SsoDeps } from "./sso-deps.ts";

/**
 * Spends a finished sign-in's code (one conditional update: of two exchanges at once exactly one
 * gets it) and opens the session: a token session (`as: "token"`) or, for a browser from an allowed
 * origin, a browser session (`as: "browser"`). An unknown, spent or expired code, a code of another
 * tenant than the request's, and a member disabled meanwhile are the same 401.
 */
export async function exchangeSsoCode(
  deps: SsoDeps,
  ctx: Ctx,
  input: { code: string; as: "token" },
): Promise<TokenPair>;
export async function exchangeSsoCode(
  deps: SsoDeps,
  ctx: Ctx,
  input: { code: string; as: "browser" },
): Promise<BrowserSignIn>;
export async function exchangeSsoCode(
  deps: SsoDeps,
  ctx: Ctx,
  input: { code: string; as: "token" | "browser" },
): Promise<TokenPair | BrowserSignIn> {
  const now = deps.clock.now();
  // by its unguessable hash: a named platform lookup on the platform host (the code names its tenant)
  const [spent] = await withTenantOrPlatformDatabase(deps, ctx, ctx.tenantId, (db) =>
    db
      .update(ssoSignInCodes)
      .set({ usedAt: now })
      .where(
        and(
          eq(ssoSignInCodes.codeHash, tokenHash(input.code)),
          isNull(ssoSignInCodes.usedAt),
          gt(ssoSignInCodes.expiresAt, now),
          ctx.tenantId === null ? undefined : eq(ssoSignInCodes.tenantId, ctx.tenantId),
        ),
      )
      .returning({ userId: ssoSignInCodes.userId, tenantId: ssoSignInCodes.tenantId }),
  );
  if (!spent) throw invalidCredentials();
  const identity = await withTenantOrPlatformDatabase(deps, ctx, spent.tenantId, (db) =>
    loadIdentity(db, spent.userId, spent.tenantId),
  );
  if (identity?.status !== "Active") throw invalidCredentials();
  const signIn: SignIn = { identity, ctx: { ...ctx, tenantId: spent.tenantId }, method: "sso" };
  return input.as === "browser" ? startBrowserSession(deps, signIn) : startTokenSession(deps, signIn);
}
