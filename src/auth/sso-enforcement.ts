import { and, eq, sql } from "drizzle-orm";
import { withDatabase } from "../db/operation.ts";
import { tenantEmailDomains, tenantSsoSettings } from "../db/schema/sso.ts";
import { AppError } from "../errors.ts";
import type { AuthDeps } from "./deps.ts";
import type { SignIn } from "./sessions.ts";

/** The sign-ins with a credential Plinth holds itself, which the identity provider cannot revoke. */
const HELD: readonly SignIn["method"][] = ["password", "email_code", "email_link", "sms", "passkey"];

/**
 * Refuses a password, SMS, passkey or e-mail-code sign-in (403) for an address of one of the sign-in tenant's
 * verified e-mail domains while the tenant enforces single sign-on (docs/sso.md, "Enforcement"),
 * except the tenant's break-glass owner. Platform staff (no tenant) are never held. Checked after
 * the credential, so the answer tells only someone who knew it.
 */
export async function assertSsoNotEnforced(deps: AuthDeps, signIn: SignIn): Promise<void> {
  const { tenantId, email, userId } = signIn.identity;
  if (tenantId === null || !HELD.includes(signIn.method)) return;
  const domain = email.slice(email.lastIndexOf("@") + 1).toLowerCase();
  const [held] = await withDatabase(deps, signIn.ctx, (db) =>
    db
      .select({ tenantId: tenantSsoSettings.tenantId })
      .from(tenantSsoSettings)
      .innerJoin(
        tenantEmailDomains,
        and(
          eq(tenantEmailDomains.tenantId, tenantSsoSettings.tenantId),
          eq(tenantEmailDomains.domain, domain),
          eq(tenantEmailDomains.status, "verified"),
        ),
      )
      .where(
        and(
          eq(tenantSsoSettings.tenantId, tenantId),
          eq(tenantSsoSettings.enforced, true),
          sql`${tenantSsoSettings.breakGlassUserId} is distinct from ${userId}`,
        ),
      )
      .limit(1),
  );
  if (held) throw new AppError("forbidden", "This address signs in with the organisation's single sign-on.");
}
