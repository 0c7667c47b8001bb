import { and, eq } from "drizzle-orm";
import type { Executor } from "../db/client.ts";
import { passkeys } from "../db/schema/index.ts";
import { backupCodesLeft } from "./backup-codes.ts";
import { totpEnrolled } from "./totp-factor.ts";
import { sameTenant } from "./user-identity.ts";

/**
 * A kind of second factor, as the sign-in step lists it (`methods`) and as a session's `amr` states it
 * once proved (RFC 8176). docs/auth.md "Second factors: adding a kind" says how another kind (passkeys)
 * plugs in: a line in `SECOND_FACTORS`, and a `FactorCheck` handed to `finishMfaSignIn` / `stepUp`.
 */
export interface SecondFactor {
  /** The name in `methods` (`totp`, `backup_code`, `passkey`). */
  method: string;
  /** What proving it adds to the session's `amr` (`mfa` is added by the step itself). */
  amr: readonly string[];
  /**
   * Whether the user can prove it now (enrolled and confirmed) signed in to `tenantId` (null: platform
   * staff): a factor bound to a tenant (a passkey) counts only there; `"any"`: in any tenant.
   */
  enrolled(db: Executor, userId: string, tenantId: FactorScope): Promise<boolean>;
  /**
   * A fallback (backup codes): listed only beside a factor that is not one, and never by itself makes
   * a sign-in need the step.
   */
  fallback?: true;
}

/** Where a factor must be provable: the tenant signed in to (null: platform staff), or `"any"`. */
export type FactorScope = string | null | "any";

/** Whether a user holds a passkey in `tenantId` (src/auth/passkeys.ts: a passkey is a tenant's). */
export async function hasPasskey(db: Executor, userId: string, tenantId: FactorScope): Promise<boolean> {
  const [row] = await db
    .select({ id: passkeys.id })
    .from(passkeys)
    .where(
      and(
        eq(passkeys.userId, userId),
        tenantId === "any" ? undefined : sameTenant(passkeys.tenantId, tenantId),
      ),
    )
    .limit(1);
  return row !== undefined;
}

/** Every second factor Plinth knows, in the order `methods` lists them. A new kind adds its line. */
export const SECOND_FACTORS: readonly SecondFactor[] = [
  { method: "totp", amr: ["otp"], enrolled: totpEnrolled },
  // `hwk` or `swk` as the passkey says: its check answers the real value (auth/passkey-sign-in.ts)
  { method: "passkey", amr: ["hwk"], enrolled: hasPasskey },
  {
    method: "backup_code",
    amr: ["otp"],
    enrolled: async (db, userId) => (await backupCodesLeft(db, userId)) > 0,
    fallback: true,
  },
];

/**
 * The second factors a user can prove now signed in to `tenantId` (none when only fallbacks are
 * left): TOTP and backup codes are the user's everywhere, a passkey only in its own tenant.
 */
export async function enrolledMethods(
  db: Executor,
  userId: string,
  tenantId: FactorScope,
): Promise<string[]> {
  const found: SecondFactor[] = [];
  for (const factor of SECOND_FACTORS) if (await factor.enrolled(db, userId, tenantId)) found.push(factor);
  return found.some((f) => !f.fallback) ? found.map((f) => f.method) : [];
}

/** Whether the user has a second factor that is not a fallback, in `tenantId` (or `"any"`). */
export async function hasSecondFactor(db: Executor, userId: string, tenantId: FactorScope): Promise<boolean> {
  return (await enrolledMethods(db, userId, tenantId)).length > 0;
}

/** The `amr` values proving `method` adds. */
export function amrOfMethod(method: string): readonly string[] {
  return SECOND_FACTORS.find((f) => f.method === method)?.amr ?? [];
}
