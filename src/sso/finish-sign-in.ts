import { and, eq } from "drizzle-orm";
import { recordAuditLimited } from "../audit/record.ts";
import { opaqueToken, tokenHash } from "../auth/opaque-tokens.ts";
import { normaliseEmail } from "../auth/user-identity.ts";
import type { TenantCtx } from "../context.ts";
import { withDatabase, withTransaction } from "../db/operation.ts";
import { ssoSignInCodes, tenantEmailDomains } from "../db/schema/sso.ts";
import type { SsoAttempt } from "./attempts.ts";
import type { SsoCheck, SsoConnectionRow, SsoProfile } from "./connection-types.ts";
import { mappedRole, provisionSsoMember } from "./provision.ts";
import { withParam } from "./return-to.ts";
import type { SsoDeps } from "./sso-deps.ts";
import { sealTestReport } from "./test-report.ts";

/** How long the code a finished sign-in sends to `returnTo` can be exchanged. */
export const CODE_SECONDS = 60;

/**
 * What a callback answers: the browser goes to `location` (303); or a test sign-in's report is
 * shown (started by the API); or, for one started in the console, a page sends the browser on to
 * `location`, the console's report page (a navigation from Plinth's own page, so the console's
 * `SameSite=Strict` session cookie goes with it even after a cross-site IdP's redirect or POST).
 */
export type SsoOutcome =
  | { kind: "redirect"; location: string }
  | { kind: "report"; report: SsoTestReport }
  | { kind: "continue"; location: string };

/** A test sign-in's answer: every check, in words, and who the provider said signed in. */
export interface SsoTestReport {
  ok: boolean;
  connectionId: string;
  checks: SsoCheck[];
  profile: { subject: string; email: string; name: string; groups: string[]; role: string } | null;
}

/** The domain part of an address, lower case. */
export const domainOf = (email: string): string => email.slice(email.lastIndexOf("@") + 1).toLowerCase();

/** Whether `domain` is one of the tenant's verified e-mail domains. */
export async function isVerifiedDomainOf(deps: SsoDeps, ctx: TenantCtx, domain: string): Promise<boolean> {
  const [row] = await withDatabase(deps, ctx, (db) =>
    db
      .select({ id: tenantEmailDomains.id })
      .from(tenantEmailDomains)
      .where(
        and(
          eq(tenantEmailDomains.tenantId, ctx.tenantId),
          eq(tenantEmailDomains.domain, domain),
          eq(tenantEmailDomains.status, "verified"),
        ),
      ),
  );
  return row !== undefined;
}

/** The tenant ctx a callback continues in: the attempt's tenant, with the callback request's address and agent. */
export const attemptCtx = (
  ctx: { clientIp?: string; userAgent?: string; requestId?: string },
  attempt: SsoAttempt,
): TenantCtx => ({
  ...ctx,
  tenantId: attempt.tenantId,
  actor: { type: "anonymous" },
});

/**
 * A test sign-in's end: its report answered (started by the API, `returnTo` empty), or sealed into
 * the console's report page's address (`returnTo?report=…`, started in the console).
 */
async function testOutcome(
  deps: SsoDeps,
  ctx: TenantCtx,
  attempt: SsoAttempt,
  report: SsoTestReport,
): Promise<SsoOutcome> {
  if (!attempt.returnTo) return { kind: "report", report };
  const location = new URL(attempt.returnTo);
  location.searchParams.set("report", await sealTestReport(deps, ctx, report));
  return { kind: "continue", location: location.toString() };
}

/**
 * A sign-in that failed a check: recorded (`auth.sign_in`, outcome failure, method `sso`, the
 * failed check in words), then the browser goes back to `returnTo` with `?error=sso_failed` (the
 * reason stays in the audit log: it may name the provider's configuration), or a test sign-in
 * shows every check.
 */
export async function failSsoSignIn(
  deps: SsoDeps,
  ctx: TenantCtx,
  input: {
    attempt: SsoAttempt;
    connection: SsoConnectionRow;
    checks: SsoCheck[];
    /** The `error` sent to `returnTo` when the person can act on it (`seat_limit_reached`); else `sso_failed`. */
    error?: "seat_limit_reached";
  },
): Promise<SsoOutcome> {
  const failed = input.checks.find((check) => !check.ok);
  await recordAuditLimited(deps, ctx, {
    action: "auth.sign_in",
    outcome: "failure",
    target: { type: "sso_connection", id: input.connection.id },
    details: { method: "sso", type: input.connection.type, check: failed?.check, reason: failed?.detail },
  });
  if (input.attempt.test)
    return testOutcome(deps, ctx, input.attempt, {
      ok: false,
      connectionId: input.connection.id,
      checks: input.checks,
      profile: null,
    });
  return {
    kind: "redirect",
    location: withParam(input.attempt.returnTo ?? "", "error", input.error ?? "sso_failed"),
  };
}

/**
 * The one end of every connection type's callback (docs/sso.md, "Finishing a sign-in"), once the
 * protocol's checks passed (`checks`, all ok): the address must be in one of the tenant's verified
 * e-mail domains; the member is found or provisioned just in time (`provisionSsoMember`); a
 * single-use code valid `CODE_SECONDS` is stored by hash and the browser is sent (303) to
 * `returnTo?code=…`, which `POST /api/auth/sso/exchange` turns into a session. A test sign-in stops
 * before provisioning and reports every check.
 */
export async function finishSsoSignIn(
  deps: SsoDeps,
  ctx: TenantCtx,
  input: { attempt: SsoAttempt; connection: SsoConnectionRow; profile: SsoProfile; checks: SsoCheck[] },
): Promise<SsoOutcome> {
  const { attempt, connection } = input;
  const profile = { ...input.profile, email: normaliseEmail(input.profile.email) };
  const checks = [...input.checks];
  const domain = domainOf(profile.email);
  const addressOk = /^[^@\s]+@[^@\s]+\.[^@\s]+$/.test(profile.email);
  checks.push({
    check: "email",
    ok: addressOk,
    detail: addressOk
      ? `The provider gave the address ${profile.email}.`
      : "The provider gave no e-mail address (check the connection's claim mapping for email).",
  });
  if (!addressOk) return failSsoSignIn(deps, ctx, { attempt, connection, checks });
  const verified = await isVerifiedDomainOf(deps, ctx, domain);
  checks.push({
    check: "email_domain",
    ok: verified,
    detail: verified
      ? `${domain} is a verified domain of this tenant.`
      : `${domain} is not a verified e-mail domain of this tenant: verify it first (POST /api/tenant/email-domains).`,
  });
  if (!verified) return failSsoSignIn(deps, ctx, { attempt, connection, checks });
  if (attempt.test)
    return testOutcome(deps, ctx, attempt, {
      ok: true,
      connectionId: connection.id,
      checks,
      profile: {
        subject: profile.subject,
        email: profile.email,
        name: profile.name,
        groups: profile.groups,
        role: mappedRole(connection, profile.groups),
      },
    });
  const member = await provisionSsoMember(deps, ctx, { connection, profile });
  if ("refused" in member) {
    checks.push({ check: member.refused, ok: false, detail: member.detail });
    return failSsoSignIn(deps, ctx, {
      attempt,
      connection,
      checks,
      ...(member.refused === "seats" ? { error: "seat_limit_reached" } : {}),
    });
  }
  const code = opaqueToken(32);
  const now = deps.clock.now();
  await withTransaction(deps, ctx, (tx) =>
    tx.insert(ssoSignInCodes).values({
      tenantId: ctx.tenantId,
      userId: member.identity.userId,
      connectionId: connection.id,
      codeHash: tokenHash(code),
      amr: profile.amr,
      createdAt: now,
      expiresAt: new Date(now.getTime() + CODE_SECONDS * 1000),
    }),
  );
  return { kind: "redirect", location: withParam(attempt.returnTo ?? "", "code", code) };
}
