import { and, eq } from "drizzle-orm";
import { normaliseEmail } from "../auth/user-identity.ts";
import { cachedTenantFeatures } from "../billing/entitlements.ts";
import type { Ctx, TenantCtx } from "../context.ts";
import { withDatabase, withTenantOrPlatformDatabase } from "../db/operation.ts";
import { ssoConnections, tenantEmailDomains, tenants } from "../db/schema/index.ts";
import { AppError } from "../errors.ts";
import { createSsoAttempt } from "./attempts.ts";
import { connectionTypes } from "./connection-type-registry.ts";
import type { SsoConnectionRow } from "./connection-types.ts";
import { domainOf } from "./finish-sign-in.ts";
import { checkReturnTo } from "./return-to.ts";
import type { SsoDeps } from "./sso-deps.ts";

const noConnection = () => new AppError("not_found", "No single sign-on applies to this address.");

/** A started sign-in: where to send the browser, and the kind of callback that will come back. */
export interface StartedSignIn {
  redirectUrl: string;
  type: SsoConnectionRow["type"];
}

/**
 * Starts a sign-in at `connection` (its type's `start`, then the attempt stored by its state's
 * hash, bound to the browser by `browserBinding`, the SHA-256 of its cookie's value): the provider
 * URL to send the browser to. `test`: a test sign-in, which reports its checks and signs no one in.
 */
export async function startSsoSignIn(
  deps: SsoDeps,
  ctx: TenantCtx,
  input: {
    connection: SsoConnectionRow;
    returnTo: string;
    test: boolean;
    browserBinding: string;
    loginHint?: string;
  },
): Promise<StartedSignIn> {
  const type = connectionTypes[input.connection.type];
  if (!type)
    throw new AppError("unavailable", `Connections of type ${input.connection.type} are not available.`);
  const { redirectUrl } = await createSsoAttempt(deps, ctx, {
    connection: input.connection,
    returnTo: input.returnTo,
    test: input.test,
    browserBinding: input.browserBinding,
    start: (state) =>
      type.start(deps, ctx, { connection: input.connection, state, loginHint: input.loginHint }),
  });
  return { redirectUrl, type: input.connection.type };
}

/**
 * Email-first sign-in (`POST /api/auth/sso/discover`): an address of a domain some tenant has
 * verified, whose tenant is Active, has the `sso` feature and an active connection, starts a
 * sign-in there. Any other address is the same 404: an unverified domain is never routed.
 * `returnTo` is checked first (`checkReturnTo`).
 */
export async function discoverSsoSignIn(
  deps: SsoDeps,
  ctx: Ctx,
  input: { email: string; returnTo?: string; browserBinding: string },
): Promise<StartedSignIn> {
  const returnTo = checkReturnTo(deps.config, input.returnTo);
  const email = normaliseEmail(input.email);
  if (!/^[^@\s]+@[^@\s]+$/.test(email)) throw noConnection();
  // on the platform host a named platform lookup: the verified domain names the tenant
  const [owner] = await withTenantOrPlatformDatabase(deps, ctx, ctx.tenantId, (db) =>
    db
      .select({ tenantId: tenantEmailDomains.tenantId })
      .from(tenantEmailDomains)
      .innerJoin(tenants, eq(tenants.id, tenantEmailDomains.tenantId))
      .where(
        and(
          eq(tenantEmailDomains.domain, domainOf(email)),
          eq(tenantEmailDomains.status, "verified"),
          eq(tenants.status, "Active"),
        ),
      ),
  );
  if (!owner) throw noConnection();
  // the request's tenant (its host or code), when it has one, is the only one routed to
  if (ctx.tenantId !== null && ctx.tenantId !== owner.tenantId) throw noConnection();
  const tenantCtx: TenantCtx = { ...ctx, tenantId: owner.tenantId };
  if (!(await cachedTenantFeatures(deps, tenantCtx)).features.sso?.enabled) throw noConnection();
  const [connection] = await withDatabase(deps, tenantCtx, (db) =>
    db
      .select()
      .from(ssoConnections)
      .where(and(eq(ssoConnections.tenantId, owner.tenantId), eq(ssoConnections.status, "active"))),
  );
  if (!connection) throw noConnection();
  return startSsoSignIn(deps, tenantCtx, {
    connection,
    returnTo,
    test: false,
    browserBinding: input.browserBinding,
    loginHint: email,
  });
}
