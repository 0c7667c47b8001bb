import { and, asc, count, eq, gt, isNotNull, isNull, ne, notLike, or } from "drizzle-orm";
import type { Ctx } from "../context.ts";
import type { Executor } from "../db/client.ts";
import { type DatabaseDeps, withPlatformDatabase, withPlatformTransaction } from "../db/operation.ts";
import { totpFactors, users } from "../db/schema/index.ts";
import { DATA_KEY_PREFIX, TenantSecretError, type TenantSecretKeyring } from "../security/tenant-secrets.ts";
import { openTotpSecret, sealTotpSecret } from "./totp-factor.ts";

export interface TotpRotationResult {
  rotated: number;
  /** Factors no configured key opens (left unchanged): by user and key id, never a value. */
  failed: { userId: string; keyId: string; reason: string }[];
  /** Factors still not under the current key when the run ended. */
  remaining: number;
}

/**
 * Factors sealed where they no longer belong: a tenant user's still under a master key (before data
 * keys), a user of no tenant's under a master key other than the current one.
 */
const misplaced = (keyring: TenantSecretKeyring) =>
  or(
    and(
      isNotNull(users.tenantId),
      notLike(totpFactors.secretKeyId, `${DATA_KEY_PREFIX.replace("_", "\\_")}%`),
    ),
    and(isNull(users.tenantId), ne(totpFactors.secretKeyId, keyring.current.keyId)),
  );

/**
 * `bun run secrets:rotate`'s last step: every TOTP secret (sealed like a tenant secret, bound to its
 * user) sealed where it no longer belongs is re-sealed: a tenant user's under the tenant's data key
 * (whose wrapping the rotation renewed), a user of no tenant's under the current master key. In
 * batches, one transaction each, rows locked `skip locked`; idempotent, as the tenant secrets'.
 * Without it a retired master key would leave every authenticator sealed under it unopenable.
 */
export async function rotateTotpSecrets(
  deps: DatabaseDeps & { tenantSecretKeyring: TenantSecretKeyring },
  ctx: Ctx,
  input: { batchSize: number },
): Promise<TotpRotationResult> {
  const keyring = deps.tenantSecretKeyring;
  const result: TotpRotationResult = { rotated: 0, failed: [], remaining: 0 };
  let after: string | null = null;
  for (;;) {
    const from: string | null = after;
    // every user's factors: the named platform path
    const batch: { rows: number; last: string | null } = await withPlatformTransaction(deps, ctx, (tx) =>
      rotateBatch(tx, keyring, from, input.batchSize, result),
    );
    if (batch.rows < input.batchSize || !batch.last) break;
    after = batch.last;
  }
  const [left] = await withPlatformDatabase(deps, ctx, (db) =>
    db
      .select({ n: count() })
      .from(totpFactors)
      .innerJoin(users, eq(users.id, totpFactors.userId))
      .where(misplaced(keyring)),
  );
  result.remaining = left?.n ?? 0;
  return result;
}

async function rotateBatch(
  tx: Executor,
  keyring: TenantSecretKeyring,
  after: string | null,
  batchSize: number,
  result: TotpRotationResult,
): Promise<{ rows: number; last: string | null }> {
  const rows = await tx
    .select({ factor: totpFactors, tenantId: users.tenantId })
    .from(totpFactors)
    .innerJoin(users, eq(users.id, totpFactors.userId))
    .where(and(misplaced(keyring), after ? gt(totpFactors.id, after) : undefined))
    .orderBy(asc(totpFactors.id))
    .limit(batchSize)
    .for("update", { of: totpFactors, skipLocked: true });
  for (const { factor: row, tenantId } of rows) {
    let secret: string;
    try {
      secret = await openTotpSecret(tx, keyring, row);
    } catch (error) {
      if (!(error instanceof TenantSecretError)) throw error;
      result.failed.push({ userId: row.userId, keyId: row.secretKeyId, reason: error.reason });
      continue;
    }
    const sealed = await sealTotpSecret(tx, keyring, { id: row.userId, tenantId }, secret);
    const updated = await tx
      .update(totpFactors)
      .set({ secretKeyId: sealed.keyId, secretNonce: sealed.nonce, secretCiphertext: sealed.ciphertext })
      .where(and(eq(totpFactors.id, row.id), eq(totpFactors.secretKeyId, row.secretKeyId)))
      .returning({ id: totpFactors.id });
    result.rotated += updated.length;
  }
  return { rows: rows.length, last: rows.at(-1)?.factor.id ?? null };
}
