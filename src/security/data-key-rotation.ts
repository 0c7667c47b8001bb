import { and, asc, count, eq, gt, ne } from "drizzle-orm";
import type { Ctx } from "../context.ts";
import type { Executor } from "../db/client.ts";
import { type DatabaseDeps, withPlatformTransaction } from "../db/operation.ts";
import { tenantDataKeys } from "../db/schema/secrets.ts";
import { announceDataKeyChange, unwrapDataKey, wrapDataKey } from "./tenant-data-keys.ts";
import { TenantSecretError, type TenantSecretKeyring } from "./tenant-secrets.ts";

export interface RewrapResult {
  /** Data keys wrapped again under the current master key by this run. */
  rewrapped: number;
  /** Data keys no configured master key unwraps (left as they were): by tenant and wrapping key id. */
  failed: { tenantId: string; keyId: string; reason: string }[];
  /** Data keys still not wrapped under the current master key after the run. */
  remaining: number;
}

async function rewrapBatch(
  tx: Executor,
  keyring: TenantSecretKeyring,
  input: { after: string | null; batchSize: number; now: Date; result: RewrapResult },
): Promise<{ rows: number; last: string | null }> {
  const rows = await tx
    .select()
    .from(tenantDataKeys)
    .where(
      and(
        ne(tenantDataKeys.wrappingKeyId, keyring.current.keyId),
        input.after ? gt(tenantDataKeys.tenantId, input.after) : undefined,
      ),
    )
    .orderBy(asc(tenantDataKeys.tenantId))
    .limit(input.batchSize)
    .for("update", { skipLocked: true });
  for (const row of rows) {
    let key: ReturnType<typeof unwrapDataKey>;
    try {
      key = unwrapDataKey(keyring, row);
    } catch (error) {
      if (!(error instanceof TenantSecretError)) throw error;
      input.result.failed.push({ tenantId: row.tenantId, keyId: row.wrappingKeyId, reason: error.reason });
      continue;
    }
    const updated = await tx
      .update(tenantDataKeys)
      .set({ ...wrapDataKey(keyring, row.tenantId, key), updatedAt: input.now })
      .where(
        and(eq(tenantDataKeys.tenantId, row.tenantId), eq(tenantDataKeys.wrappingKeyId, row.wrappingKeyId)),
      )
      .returning({ tenantId: tenantDataKeys.tenantId });
    input.result.rewrapped += updated.length;
    keyring.dataKeys.evictTenant(row.tenantId);
    await announceDataKeyChange(tx, row.tenantId);
  }
  return { rows: rows.length, last: rows.at(-1)?.tenantId ?? null };
}

/**
 * `secrets:rotate`'s first step after a master-key change: every tenant data key not wrapped under
 * the current master key is unwrapped and wrapped again under it (one small row per tenant; the
 * values sealed under the data key stay as they are). Batches of `batchSize`, one platform
 * transaction each, rows locked `skip locked`; idempotent.
 */
export async function rewrapTenantDataKeys(
  deps: DatabaseDeps & { clock: { now(): Date }; tenantSecretKeyring: TenantSecretKeyring },
  ctx: Ctx,
  input: { batchSize: number },
): Promise<RewrapResult> {
  const keyring = deps.tenantSecretKeyring;
  const result: RewrapResult = { rewrapped: 0, failed: [], remaining: 0 };
  let after: string | null = null;
  for (;;) {
    const from: string | null = after;
    const batch: { rows: number; last: string | null } = await withPlatformTransaction(deps, ctx, (tx) =>
      rewrapBatch(tx, keyring, { after: from, batchSize: input.batchSize, now: deps.clock.now(), result }),
    );
    if (batch.rows < input.batchSize || !batch.last) break;
    after = batch.last;
  }
  const [left] = await withPlatformTransaction(deps, ctx, (tx) =>
    tx
      .select({ n: count() })
      .from(tenantDataKeys)
      .where(ne(tenantDataKeys.wrappingKeyId, keyring.current.keyId)),
  );
  result.remaining = left?.n ?? 0;
  return result;
}
