import { and, eq, isNull } from "drizzle-orm";
import { epochMs, isFresh } from "../clock.ts";
import type { Ctx } from "../context.ts";
import { withTenantOrPlatformDatabase, withTransactionOrPlatform } from "../db/operation.ts";
import { sessions } from "../db/schema/index.ts";
import { AppError } from "../errors.ts";
import { assertAllowed } from "../security/windows.ts";
import type { AuthDeps } from "./deps.ts";
import { codeCheck, type FactorCheck } from "./mfa-step.ts";
import { enrolledMethods } from "./second-factors.ts";
import { type SessionAuth, sessionAuthOf } from "./session-auth.ts";
import { callerOf, clientIpOf } from "./sessions.ts";
import { MFA_ACR } from "./tokens.ts";
import { loadIdentity } from "./user-identity.ts";

/**
 * The reusable step-up guard of a sensitive operation (password change, API key creation, webhook
 * secret rotation, enrolling or removing a factor; SSO and SCIM configuration call it too): a user
 * with a second factor must have proved one on this session within `Authentication:Mfa:StepUpMaxAgeMinutes`
 * (or `maxAgeSeconds`), else `step_up_required` (HTTP 401 with RFC 9470's challenge); an `auth_time`
 * more than `CLOCK_STEP_BACK_MS` ahead of now (a clock since put back) is not recent. Reads the session
 * row itself, so a step-up a moment ago counts at once. A user without a second factor has nothing to
 * step up with and passes (the tenant's policy sends them to enrol); API keys and Plinth itself pass.
 */
export async function requireRecentSecondFactor(
  deps: Pick<AuthDeps, "database" | "clock" | "config">,
  ctx: Ctx,
  options: { maxAgeSeconds?: number } = {},
): Promise<void> {
  if (ctx.actor.type !== "user") return;
  const { userId, sessionId } = callerOf(ctx);
  const maxAgeSeconds =
    options.maxAgeSeconds ?? deps.config.settings.Authentication.Mfa.StepUpMaxAgeMinutes * 60;
  const [session] = await withTenantOrPlatformDatabase(deps, ctx, ctx.tenantId, (db) =>
    db
      .select({ amr: sessions.amr, authTime: sessions.authTime, createdAt: sessions.createdAt })
      .from(sessions)
      .where(eq(sessions.id, sessionId))
      .limit(1),
  );
  if (!session) throw new AppError("unauthorized");
  const auth = sessionAuthOf(session);
  // RFC 9470's max_age is inclusive (whole milliseconds: younger than max_age + 1 ms); an auth_time
  // stamped by a clock since put back is not recent (`isFresh`), else it counted for max_age plus the step
  const recent = isFresh(auth.authTime.getTime(), maxAgeSeconds * 1000 + 1, epochMs(deps.clock));
  if (auth.amr.includes("mfa") && recent) return;
  const methods = await withTenantOrPlatformDatabase(deps, ctx, ctx.tenantId, (db) =>
    enrolledMethods(db, userId, ctx.tenantId),
  );
  if (methods.length === 0) return;
  throw new AppError("step_up_required", "Prove a second factor again (POST /api/auth/mfa/step-up).", {
    stepUp: { acr: MFA_ACR, maxAgeSeconds },
  });
}

/**
 * Step-up on the caller's session with a second factor `check` proves (counted in the second-factor
 * windows): the session's `amr` gains the factor's values and `mfa`, its `auth_time` becomes now. A
 * token session gets a fresh access token saying so (its refresh token stays, and later ones say so
 * too); a browser session needs nothing more (null).
 */
export async function stepUpSession(
  deps: AuthDeps,
  ctx: Ctx,
  input: { method: string; check: FactorCheck },
): Promise<{ accessToken: string; tokenType: "Bearer"; expiresIn: number } | null> {
  const { userId, sessionId } = callerOf(ctx);
  assertAllowed(await deps.windows.consume("mfaVerify", { account: userId, ip: clientIpOf(ctx) }));
  const methods = await withTenantOrPlatformDatabase(deps, ctx, ctx.tenantId, (db) =>
    enrolledMethods(db, userId, ctx.tenantId),
  );
  const wrong = () => new AppError("unauthorized", "The second factor does not match.");
  if (!methods.includes(input.method)) throw wrong();
  const now = deps.clock.now();
  const stepped = await withTransactionOrPlatform(deps, ctx, async (tx, txCtx) => {
    const proved = await input.check(txCtx, { userId, tenantId: ctx.tenantId });
    if (!proved) throw wrong();
    const [session] = await tx
      .select({ amr: sessions.amr, kind: sessions.kind, impersonatorId: sessions.impersonatorId })
      .from(sessions)
      .where(and(eq(sessions.id, sessionId), isNull(sessions.revokedAt)));
    if (!session) throw new AppError("unauthorized");
    const auth: SessionAuth = { amr: [...new Set([...session.amr, ...proved, "mfa"])], authTime: now };
    await tx.update(sessions).set(auth).where(eq(sessions.id, sessionId));
    return { auth, kind: session.kind, identity: await loadIdentity(tx, userId, ctx.tenantId) };
  });
  await deps.windows.reset("mfaVerify", { account: userId });
  if (stepped.kind !== "token") return null;
  if (!stepped.identity) throw new AppError("unauthorized");
  const { identity, auth } = stepped;
  const accessToken = await deps.tokens.issueAccessToken({
    userId,
    tenantId: identity.tenantId,
    sessionId,
    roles: identity.roles,
    platformRoles: identity.platformRoles,
    passwordChangeRequired: identity.mustChangePassword,
    amr: auth.amr,
    authTime: Math.floor(auth.authTime.getTime() / 1000),
  });
  return { accessToken, tokenType: "Bearer", expiresIn: deps.tokens.accessTokenSeconds };
}

/** `POST /api/auth/mfa/step-up` with a TOTP code or a backup code. */
export async function stepUpWithCode(
  deps: AuthDeps,
  ctx: Ctx,
  input: { code?: string; backupCode?: string },
): Promise<{ accessToken: string; tokenType: "Bearer"; expiresIn: number } | null> {
  return stepUpSession(deps, ctx, codeCheck(deps, input));
}
