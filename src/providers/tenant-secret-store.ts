import { and, asc, eq, gt, notLike, sql } from "drizzle-orm";
import { z } from "zod";
import { recordAudit } from "../audit/record.ts";
import type { Clock } from "../clock.ts";
import type { Ctx, TenantCtx } from "../context.ts";
import { type Executor, execute } from "../db/client.ts";
import {
  type DatabaseDeps,
  withDatabase,
  withPlatformDatabase,
  withPlatformTransaction,
  withTransaction,
} from "../db/operation.ts";
import { tenantSecrets } from "../db/schema/secrets.ts";
import { AppError } from "../errors.ts";
import { cursorCodec, type Page, type PageRequest, pageOf } from "../pagination.ts";
import { openSealed, sealForTenant } from "../security/tenant-data-keys.ts";
import {
  DATA_KEY_PREFIX,
  openSecret,
  TenantSecretError,
  type TenantSecretKeyring,
} from "../security/tenant-secrets.ts";
import { getTenant } from "../tenancy/tenants.ts";

/** Secret names: what a provider's `secretRefs` point at; safe to log and to put in job payloads. */
export const SECRET_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
export const MAX_SECRET_BYTES = 16_384;

export interface TenantSecretInfo {
  name: string;
  keyId: string;
  createdAt: Date;
  updatedAt: Date;
}

function checkName(name: string): void {
  if (!SECRET_NAME.test(name))
    throw new AppError("validation_failed", "The secret name is not valid.", {
      fields: [
        {
          path: "name",
          message: "letters, digits, '.', '_' and '-', at most 128, not starting with a symbol",
        },
      ],
    });
}

/**
 * Writes (or replaces) a secret sealed under the tenant's data key, in the caller's transaction:
 * for domain code that keeps its own secrets of a tenant it has checked (a webhook endpoint's
 * signing secret). The value is never returned.
 */
export async function writeTenantSecret(
  db: Executor,
  keyring: TenantSecretKeyring,
  tenantId: string,
  input: { name: string; value: string; now: Date },
): Promise<void> {
  const sealed = await sealForTenant(db, keyring, { tenantId, name: input.name, value: input.value });
  await db
    .insert(tenantSecrets)
    .values({ tenantId, name: input.name, ...sealed, createdAt: input.now, updatedAt: input.now })
    .onConflictDoUpdate({
      target: [tenantSecrets.tenantId, tenantSecrets.name],
      set: { ...sealed, updatedAt: input.now },
    });
}

export interface SecretDeps extends DatabaseDeps {
  clock: Clock;
  /** null: `Security:TenantSecrets` is not configured, nothing can be stored. */
  tenantSecretKeyring: TenantSecretKeyring | null;
}

/**
 * Stores (or replaces) a secret of the ctx tenant, encrypted under the current key, and records it;
 * 503 when no keys are configured. The value is never returned.
 */
export async function putTenantSecret(
  deps: SecretDeps,
  ctx: TenantCtx,
  input: { name: string; value: string },
): Promise<void> {
  if (!deps.tenantSecretKeyring)
    throw new AppError("unavailable", "Tenant secrets are not configured (Security:TenantSecrets).");
  const keyring = deps.tenantSecretKeyring;
  checkName(input.name);
  if (Buffer.byteLength(input.value, "utf8") > MAX_SECRET_BYTES)
    throw new AppError("validation_failed", "The secret value is too long.", {
      fields: [{ path: "value", message: `at most ${MAX_SECRET_BYTES} bytes` }],
    });
  await withTransaction(deps, ctx, async (tx, ctx) => {
    await getTenant(deps, ctx, { tenantId: ctx.tenantId });
    await writeTenantSecret(tx, keyring, ctx.tenantId, { ...input, now: deps.clock.now() });
    await recordAudit(tx, ctx, {
      action: "tenant_secret.put",
      target: { type: "tenant_secret", id: input.name },
      details: { name: input.name },
    });
  });
}

/** A position in a tenant's secret list: the last name seen (keyset). */
const secretCursor = cursorCodec(z.object({ name: z.string().min(1).max(200) }));

/** Names, key ids and timestamps, never values: by name, a page at a time. */
export async function listTenantSecrets(
  deps: DatabaseDeps,
  ctx: TenantCtx,
  input: PageRequest,
): Promise<Page<TenantSecretInfo>> {
  const after = secretCursor.decodeOptional(input.cursor)?.name;
  await getTenant(deps, ctx, { tenantId: ctx.tenantId });
  const rows = await withDatabase(deps, ctx, (db) =>
    db
      .select({
        name: tenantSecrets.name,
        keyId: tenantSecrets.keyId,
        createdAt: tenantSecrets.createdAt,
        updatedAt: tenantSecrets.updatedAt,
      })
      .from(tenantSecrets)
      .where(
        and(
          eq(tenantSecrets.tenantId, ctx.tenantId),
          after === undefined ? undefined : gt(tenantSecrets.name, after),
        ),
      )
      .orderBy(asc(tenantSecrets.name))
      .limit(input.limit + 1),
  );
  return pageOf(
    rows,
    input.limit,
    (row) => row,
    (row) => ({ name: row.name }),
    secretCursor,
  );
}

export async function deleteTenantSecret(
  deps: DatabaseDeps,
  ctx: TenantCtx,
  input: { name: string },
): Promise<void> {
  const { tenantId } = ctx;
  const { name } = input;
  await withTransaction(deps, ctx, async (tx, ctx) => {
    await getTenant(deps, ctx, { tenantId: ctx.tenantId });
    const deleted = await tx
      .delete(tenantSecrets)
      .where(and(eq(tenantSecrets.tenantId, tenantId), eq(tenantSecrets.name, name)))
      .returning({ id: tenantSecrets.id });
    if (deleted.length === 0) throw new AppError("not_found", "No such secret.");
    await recordAudit(tx, ctx, {
      action: "tenant_secret.deleted",
      target: { type: "tenant_secret", id: name },
      details: { name },
    });
  });
}

/**
 * The decrypted value, for server-side use only (a provider call). null when the tenant has no
 * such secret. Never expose it over HTTP, in logs or in job payloads: pass the name instead.
 */
export async function readTenantSecret(
  db: Executor,
  keyring: TenantSecretKeyring,
  tenantId: string,
  name: string,
): Promise<string | null> {
  const [row] = await db
    .select({ keyId: tenantSecrets.keyId, nonce: tenantSecrets.nonce, ciphertext: tenantSecrets.ciphertext })
    .from(tenantSecrets)
    .where(and(eq(tenantSecrets.tenantId, tenantId), eq(tenantSecrets.name, name)));
  return row ? openSealed(db, keyring, { binding: tenantId, name, sealed: row }) : null;
}

export interface RotationResult {
  /** Rows re-encrypted under the current key by this run. */
  rotated: number;
  /** Rows that no configured key opens; left as they were. */
  failed: { tenantId: string; name: string; keyId: string; reason: string }[];
  /** Rows still not under the current key after the run (failed ones). */
  remaining: number;
}

/** Values sealed directly under a master key (before data keys): what a rotation re-seals. */
const underMasterKey = notLike(tenantSecrets.keyId, `${DATA_KEY_PREFIX.replace("_", "\\_")}%`);

/** One batch of a rotation: rows after `after` sealed under a master key, locked, re-sealed under the tenant's data key. */
async function rotateBatch(
  tx: Executor,
  keyring: TenantSecretKeyring,
  input: { after: string | null; batchSize: number; now: Date; failed: RotationResult["failed"] },
): Promise<{ rows: number; rotated: number; last: string | null }> {
  const rows = await tx
    .select({
      id: tenantSecrets.id,
      tenantId: tenantSecrets.tenantId,
      name: tenantSecrets.name,
      keyId: tenantSecrets.keyId,
      nonce: tenantSecrets.nonce,
      ciphertext: tenantSecrets.ciphertext,
    })
    .from(tenantSecrets)
    .where(and(underMasterKey, input.after ? gt(tenantSecrets.id, input.after) : undefined))
    .orderBy(asc(tenantSecrets.id))
    .limit(input.batchSize)
    .for("update", { skipLocked: true });
  const updates: { id: string; old_key_id: string; key_id: string; nonce: string; ciphertext: string }[] = [];
  for (const row of rows) {
    let value: string;
    try {
      value = openSecret(keyring, row.tenantId, row.name, row);
    } catch (error) {
      if (!(error instanceof TenantSecretError)) throw error;
      input.failed.push({ tenantId: row.tenantId, name: row.name, keyId: row.keyId, reason: error.reason });
      continue;
    }
    const sealed = await sealForTenant(tx, keyring, { tenantId: row.tenantId, name: row.name, value });
    updates.push({
      id: row.id,
      old_key_id: row.keyId,
      key_id: sealed.keyId,
      nonce: sealed.nonce,
      ciphertext: sealed.ciphertext,
    });
  }
  // one statement per batch; only ciphertext goes to the database, never a value
  const rotated =
    updates.length === 0
      ? 0
      : (
          await execute(
            tx,
            sql`update tenant_secrets as t
                set key_id = v.key_id, nonce = v.nonce, ciphertext = v.ciphertext, updated_at = ${input.now.toISOString()}::timestamptz
                from jsonb_to_recordset(${JSON.stringify(updates)}::jsonb)
                  as v(id uuid, old_key_id text, key_id text, nonce text, ciphertext text)
                where t.id = v.id and t.key_id = v.old_key_id
                returning t.id`,
          )
        ).length;
  return { rows: rows.length, rotated, last: rows.at(-1)?.id ?? null };
}

/**
 * Re-seals every secret still sealed directly under a master key (written before tenant data keys)
 * under its tenant's data key, in batches of `batchSize` rows, one transaction per batch (rows
 * locked, `skip locked` so parallel runs share the work). Idempotent: a second run re-seals nothing.
 * Values under a data key need nothing when the master key changes: their data key is re-wrapped.
 */
export async function rotateTenantSecrets(
  deps: DatabaseDeps & { clock: Clock; tenantSecretKeyring: TenantSecretKeyring },
  ctx: Ctx,
  input: { batchSize: number; onBatch?: (rotated: number) => void },
): Promise<RotationResult> {
  const keyring = deps.tenantSecretKeyring;
  const result: RotationResult = { rotated: 0, failed: [], remaining: 0 };
  let after: string | null = null;
  for (;;) {
    const from: string | null = after;
    // every tenant's secrets: the named platform path
    const batch: { rows: number; rotated: number; last: string | null } = await withPlatformTransaction(
      deps,
      ctx,
      (tx) =>
        rotateBatch(tx, keyring, {
          after: from,
          batchSize: input.batchSize,
          now: deps.clock.now(),
          failed: result.failed,
        }),
    );
    result.rotated += batch.rotated;
    input.onBatch?.(batch.rotated);
    if (batch.rows < input.batchSize || !batch.last) break;
    after = batch.last;
  }
  const [left] = await withPlatformDatabase(deps, ctx, (db) =>
    db.select({ count: sql<number>`count(*)::int` }).from(tenantSecrets).where(underMasterKey),
  );
  result.remaining = left?.count ?? 0;
  return result;
}
