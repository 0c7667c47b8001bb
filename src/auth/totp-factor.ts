import { and, eq, isNotNull, isNull, lt, or } from "drizzle-orm";
import { recordAudit } from "../audit/record.ts";
import type { Ctx } from "../context.ts";
import type { Executor, Tx } from "../db/client.ts";
import {
  withPlatformDatabase,
  withTenantOrPlatformDatabase,
  withTransactionOrPlatform,
} from "../db/operation.ts";
import { backupCodes, tenants, totpFactors, users } from "../db/schema/index.ts";
import { AppError } from "../errors.ts";
import { emitEvent } from "../events/outbox.ts";
import { enqueueContext } from "../jobs/enqueue.ts";
import { openSealed, sealForTenant } from "../security/tenant-data-keys.ts";
import { type SealedSecret, sealSecret, type TenantSecretKeyring } from "../security/tenant-secrets.ts";
import { assertAllowed } from "../security/windows.ts";
import { replaceBackupCodes } from "./backup-codes.ts";
import type { AuthDeps } from "./deps.ts";
import { hasPasskey } from "./second-factors.ts";
import { callerOf, clientIpOf } from "./sessions.ts";
import { newTotpSecret, totpQrSvg, totpStepOf, totpUri } from "./totp.ts";

/**
 * The name a TOTP secret is sealed under, bound to its user (where a tenant secret binds its tenant):
 * a sealed secret copied onto another user's row does not open. A tenant's own user's secret is
 * sealed under the tenant's data key (shredded with the tenant); a platform or shared user's, who
 * belongs to no one tenant, under the master key.
 */
export const sealedFor = (userId: string) => ({ binding: `user:${userId}`, name: "mfa-totp" });

function keyringOf(deps: Pick<AuthDeps, "tenantSecretKeyring">): TenantSecretKeyring {
  if (!deps.tenantSecretKeyring)
    throw new AppError("unavailable", "TOTP needs Security:TenantSecrets, which is not configured.");
  return deps.tenantSecretKeyring;
}

/** Seals a user's TOTP secret: under their tenant's data key, or the master key for a user of no tenant. */
export async function sealTotpSecret(
  db: Executor,
  keyring: TenantSecretKeyring,
  user: { id: string; tenantId: string | null },
  secret: string,
): Promise<SealedSecret> {
  const { binding, name } = sealedFor(user.id);
  return user.tenantId
    ? sealForTenant(db, keyring, { tenantId: user.tenantId, binding, name, value: secret })
    : sealSecret(keyring, binding, name, secret);
}

export function openTotpSecret(
  db: Executor,
  keyring: TenantSecretKeyring,
  row: { userId: string; secretKeyId: string; secretNonce: string; secretCiphertext: string },
): Promise<string> {
  const { binding, name } = sealedFor(row.userId);
  return openSealed(db, keyring, {
    binding,
    name,
    sealed: { keyId: row.secretKeyId, nonce: row.secretNonce, ciphertext: row.secretCiphertext },
  });
}

/** Whether the user has a confirmed TOTP authenticator. */
export async function totpEnrolled(db: Executor, userId: string): Promise<boolean> {
  const [row] = await db
    .select({ id: totpFactors.id })
    .from(totpFactors)
    .where(and(eq(totpFactors.userId, userId), isNotNull(totpFactors.confirmedAt)))
    .limit(1);
  return row !== undefined;
}

/**
 * Starts (or restarts) the caller's TOTP enrolment: a new secret, sealed, and its `otpauth://` URI and
 * QR code, shown this once. Unconfirmed until `confirmTotp`; 409 while a confirmed one exists.
 */
export async function startTotpEnrolment(deps: AuthDeps, ctx: Ctx): Promise<{ uri: string; qrSvg: string }> {
  return beginTotpEnrolment(deps, ctx, callerOf(ctx).userId);
}

/** A new pending TOTP enrolment of `userId` (the signed-in caller, or the user of an enrolment step). */
export async function beginTotpEnrolment(
  deps: AuthDeps,
  ctx: Ctx,
  userId: string,
): Promise<{ uri: string; qrSvg: string }> {
  const keyring = keyringOf(deps);
  const [user] = await withTenantOrPlatformDatabase(deps, ctx, ctx.tenantId, (db) =>
    db
      .select({ email: users.email, tenantId: users.tenantId })
      .from(users)
      .where(eq(users.id, userId))
      .limit(1),
  );
  if (!user) throw new AppError("unauthorized");
  const [tenant] = ctx.tenantId
    ? await withTenantOrPlatformDatabase(deps, ctx, ctx.tenantId, (db) =>
        db
          .select({ name: tenants.name })
          .from(tenants)
          .where(eq(tenants.id, ctx.tenantId ?? ""))
          .limit(1),
      )
    : [];
  const secret = newTotpSecret();
  await withTransactionOrPlatform(deps, ctx, async (tx) => {
    if (await totpEnrolled(tx, userId))
      throw new AppError("conflict", "A TOTP authenticator is enrolled already; remove it first.");
    const sealed = await sealTotpSecret(tx, keyring, { id: userId, tenantId: user.tenantId }, secret);
    await tx.delete(totpFactors).where(eq(totpFactors.userId, userId));
    await tx.insert(totpFactors).values({
      userId,
      secretKeyId: sealed.keyId,
      secretNonce: sealed.nonce,
      secretCiphertext: sealed.ciphertext,
      createdAt: deps.clock.now(),
    });
  });
  const uri = totpUri({
    secret,
    issuer: tenant?.name ?? deps.config.settings.Authentication.Mfa.Issuer,
    account: user.email,
  });
  return { uri, qrSvg: await totpQrSvg(uri) };
}

/** The time step `code` proves for the secret of `row` now, or null. */
async function stepOf(
  deps: AuthDeps,
  db: Executor,
  row: typeof totpFactors.$inferSelect,
  code: string,
): Promise<number | null> {
  const secret = await openTotpSecret(db, keyringOf(deps), row);
  return totpStepOf(secret, code.trim(), deps.clock.now().getTime());
}

/**
 * Confirms the caller's pending enrolment with a first code (counted in the second-factor windows)
 * and answers a fresh set of ten backup codes, shown this once. Audited as `mfa.enrolled`, emitted as
 * the tenant's `mfa.enrolled` event.
 */
export async function confirmTotp(
  deps: AuthDeps,
  ctx: Ctx,
  input: { code: string },
): Promise<{ backupCodes: string[] }> {
  const { userId } = callerOf(ctx);
  assertAllowed(await deps.windows.consume("mfaVerify", { account: userId, ip: clientIpOf(ctx) }));
  const [pending] = await withTenantOrPlatformDatabase(deps, ctx, ctx.tenantId, (db) =>
    db
      .select()
      .from(totpFactors)
      .where(and(eq(totpFactors.userId, userId), isNull(totpFactors.confirmedAt)))
      .limit(1),
  );
  if (!pending)
    throw new AppError("not_found", "No TOTP enrolment to confirm (POST /api/auth/mfa/totp first).");
  const step = await withTenantOrPlatformDatabase(deps, ctx, ctx.tenantId, (db) =>
    stepOf(deps, db, pending, input.code),
  );
  if (step === null)
    throw new AppError("validation_failed", "The code does not match.", {
      fields: [{ path: "code", message: "does not match the authenticator's current code" }],
    });
  const codes = await withTransactionOrPlatform(deps, ctx, async (_tx, txCtx) => {
    const issued = await confirmPendingTotp(deps, txCtx, { userId, code: input.code });
    if (!issued) throw new AppError("conflict", "The enrolment changed meanwhile; start again.");
    return issued;
  });
  await deps.windows.reset("mfaVerify", { account: userId });
  return { backupCodes: codes };
}

/**
 * Confirms the user's pending TOTP enrolment with `code` on the ctx's transaction: its step becomes
 * the last one used, a fresh set of backup codes is made (answered) and `mfa.enrolled` recorded and
 * emitted. Null when there is no pending enrolment or the code does not match it.
 */
export async function confirmPendingTotp(
  deps: AuthDeps,
  ctx: Ctx & { tx: Tx },
  input: { userId: string; code: string },
): Promise<string[] | null> {
  const { tx } = ctx;
  const { userId } = input;
  const [pending] = await tx
    .select()
    .from(totpFactors)
    .where(and(eq(totpFactors.userId, userId), isNull(totpFactors.confirmedAt)))
    .limit(1);
  if (!pending) return null;
  const step = await stepOf(deps, tx, pending, input.code);
  if (step === null) return null;
  const now = deps.clock.now();
  const [confirmed] = await tx
    .update(totpFactors)
    .set({ confirmedAt: now, lastUsedStep: step })
    .where(and(eq(totpFactors.id, pending.id), isNull(totpFactors.confirmedAt)))
    .returning({ id: totpFactors.id });
  if (!confirmed) return null;
  const issued = await replaceBackupCodes(tx, userId, now);
  await factorChanged(deps, tx, ctx, { action: "mfa.enrolled", userId, method: "totp" });
  return issued;
}

/**
 * Removes the caller's TOTP authenticator (the route asks for a fresh second factor first). When no
 * other second factor is left, the backup codes go with it. Audited as `mfa.removed`.
 */
export async function removeTotp(deps: AuthDeps, ctx: Ctx): Promise<void> {
  const { userId } = callerOf(ctx);
  // the backup codes are the user's in every tenant: kept while a passkey of any tenant needs them
  const passkeyAnywhere = await withPlatformDatabase(deps, ctx, (db) => hasPasskey(db, userId, "any"));
  await withTransactionOrPlatform(deps, ctx, async (tx) => {
    const removed = await tx
      .delete(totpFactors)
      .where(eq(totpFactors.userId, userId))
      .returning({ id: totpFactors.id });
    if (removed.length === 0) throw new AppError("not_found", "No TOTP authenticator is enrolled.");
    if (!passkeyAnywhere) await tx.delete(backupCodes).where(eq(backupCodes.userId, userId));
    await factorChanged(deps, tx, ctx, { action: "mfa.removed", userId, method: "totp" });
  });
}

/** The audit row and the tenant's webhook event of an enrolment or a removal, on `tx`. */
export async function factorChanged(
  deps: AuthDeps,
  tx: Tx,
  ctx: Ctx,
  input: { action: "mfa.enrolled" | "mfa.removed"; userId: string; method: string },
): Promise<void> {
  await recordAudit(tx, ctx, {
    action: input.action,
    target: { type: "user", id: input.userId },
    details: { method: input.method },
  });
  if (ctx.tenantId)
    await emitEvent(tx, enqueueContext(deps), {
      tenantId: ctx.tenantId,
      type: input.action,
      data: { userId: input.userId, method: input.method },
    });
}

/**
 * Spends a TOTP code of the user on the ctx's transaction: true when it matches (±1 step) a step
 * after the last one used, which becomes the last one used (one conditional update, so a code
 * replayed, even concurrently, is refused).
 */
export async function useTotpCode(
  deps: AuthDeps,
  ctx: Ctx & { tx: Tx },
  input: { userId: string; code: string },
): Promise<boolean> {
  const [row] = await ctx.tx
    .select()
    .from(totpFactors)
    .where(and(eq(totpFactors.userId, input.userId), isNotNull(totpFactors.confirmedAt)))
    .limit(1);
  if (!row) return false;
  const step = await stepOf(deps, ctx.tx, row, input.code);
  if (step === null) return false;
  const [spent] = await ctx.tx
    .update(totpFactors)
    .set({ lastUsedStep: step })
    .where(
      and(
        eq(totpFactors.id, row.id),
        or(isNull(totpFactors.lastUsedStep), lt(totpFactors.lastUsedStep, step)),
      ),
    )
    .returning({ id: totpFactors.id });
  return spent !== undefined;
}
