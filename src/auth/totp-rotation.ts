import { and, asc, count, eq, gt, ne } from "drizzle-orm";
import type { Ctx } from "../context.ts";
import type { Executor } from "../db/client.ts";
import { type DatabaseDeps, withDatabase, withTransaction } from "../db/operation.ts";
import { totpFactors } from "../db/schema/index.ts";
import {
  openSecret,
  sealSecret,
  TenantSecretError,
  type TenantSecretKeyring,
} from "../security/tenant-secrets.ts";
import { sealedFor } from "./totp-factor.ts";

export interface TotpRotationResult {
  rotated: number;
  /** Factors no configured key opens (left unchanged): by user and key id, never a value. */
  failed: { userId: string; keyId: string; reason: string }[];
  /** Factors still not under the current key when the run ended. */
  remaining: number;
}

/**
 * `bun run secrets:rotate`'s second half: every TOTP secret (sealed under `Security:TenantSecrets`
 * like a tenant secret, bound to its user) not under the current key is re-sealed under it, in
 * batches, one transaction each, rows locked `skip locked`; idempotent, as the tenant secrets'.
 * Without it a retired master key would leave every authenticator enrolled under it unopenable.
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
    const batch: { rows: number; last: string | null } = await withTransaction(deps, ctx, (tx) =>
      rotateBatch(tx, keyring, from, input.batchSize, result),
    );
    if (batch.rows < input.batchSize || !batch.last) break;
    after = batch.last;
  }
  const [left] = await withDatabase(deps, ctx, (db) =>
    db.select({ n: count() }).from(totpFactors).where(ne(totpFactors.secretKeyId, keyring.current.keyId)),
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
    .select()
    .from(totpFactors)
    .where(
      and(ne(totpFactors.secretKeyId, keyring.current.keyId), after ? gt(totpFactors.id, after) : undefined),
    )
    .orderBy(asc(totpFactors.id))
    .limit(batchSize)
    .for("update", { skipLocked: true });
  for (const row of rows) {
    const { binding, name } = sealedFor(row.userId);
    let secret: string;
    try {
      secret = openSecret(keyring, binding, name, {
        keyId: row.secretKeyId,
        nonce: row.secretNonce,
        ciphertext: row.secretCiphertext,
      });
    } catch (error) {
      if (!(error instanceof TenantSecretError)) throw error;
      result.failed.push({ userId: row.userId, keyId: row.secretKeyId, reason: error.reason });
      continue;
    }
    const sealed = sealSecret(keyring, binding, name, secret);
    const updated = await tx
      .update(totpFactors)
      .set({ secretKeyId: sealed.keyId, secretNonce: sealed.nonce, secretCiphertext: sealed.ciphertext })
      .where(and(eq(totpFactors.id, row.id), eq(totpFactors.secretKeyId, row.secretKeyId)))
      .returning({ id: totpFactors.id });
    result.rotated += updated.length;
  }
  return { rows: rows.length, last: rows.at(-1)?.id ?? null };
}
