import { randomBytes } from "node:crypto";
import { eq, sql } from "drizzle-orm";
import { type Executor, execute } from "../db/client.ts";
import { tenantDataKeys } from "../db/schema/secrets.ts";
import { DATA_KEY_CHANNEL } from "./data-key-cache.ts";
import {
  DATA_KEY_PREFIX,
  openSecret,
  openWith,
  type SealedSecret,
  sealSecret,
  sealWith,
  TenantSecretError,
  type TenantSecretKey,
  type TenantSecretKeyring,
} from "./tenant-secrets.ts";

/**
 * Envelope encryption of tenant secrets (docs/secrets-and-storage.md, "Tenant data keys"): each
 * tenant gets its own random 256-bit data key on first use, stored only wrapped under the current
 * master key (the wrapping is itself a sealed value, bound to the tenant and the data key's id).
 * Every secret of the tenant is sealed under the data key and names it (`tdk_…`) as its key id.
 * Destroying the wrapped key (tenant deletion) leaves every copy of those values, in the database or
 * a backup, unopenable; rotating the master key re-wraps the data keys only.
 */

export type DataKeyRow = typeof tenantDataKeys.$inferSelect;

export const isDataKeyId = (keyId: string): boolean => keyId.startsWith(DATA_KEY_PREFIX);

/**
 * Where a data key this process has not cached is read: an executor, or a function that runs the
 * read on one (so a hot path opens a connection only on a cache miss).
 */
export type DataKeySource = Executor | (<T>(work: (db: Executor) => Promise<T>) => Promise<T>);

const readWith = <T>(source: DataKeySource, work: (db: Executor) => Promise<T>): Promise<T> =>
  typeof source === "function" ? source(work) : work(source);

/** The name a data key is wrapped under: a wrapping moved to another key id or tenant does not open. */
const wrapName = (keyId: string) => `data-key:${keyId}`;

export function wrapDataKey(
  keyring: TenantSecretKeyring,
  tenantId: string,
  key: TenantSecretKey,
): Pick<DataKeyRow, "wrappingKeyId" | "nonce" | "wrapped"> {
  const sealed = sealSecret(keyring, tenantId, wrapName(key.keyId), key.dataKey.toString("base64"));
  return { wrappingKeyId: sealed.keyId, nonce: sealed.nonce, wrapped: sealed.ciphertext };
}

/** Unwraps with the master key the row names; TenantSecretError when it is not configured or differs. */
export function unwrapDataKey(keyring: TenantSecretKeyring, row: DataKeyRow): TenantSecretKey {
  const raw = openSecret(keyring, row.tenantId, wrapName(row.keyId), {
    keyId: row.wrappingKeyId,
    nonce: row.nonce,
    ciphertext: row.wrapped,
  });
  return { keyId: row.keyId, dataKey: Buffer.from(raw, "base64") };
}

function cached(keyring: TenantSecretKeyring, row: DataKeyRow): TenantSecretKey {
  const hit = keyring.dataKeys.get(row.keyId);
  if (hit) return hit;
  const key = unwrapDataKey(keyring, row);
  keyring.dataKeys.set(row.tenantId, key);
  return key;
}

/**
 * The tenant's data key, made (and wrapped under the current master key) on first use. Reads the
 * row every time, so a value is never sealed under a key destroyed meanwhile; unwraps once per process.
 */
export async function tenantDataKey(
  db: Executor,
  keyring: TenantSecretKeyring,
  tenantId: string,
): Promise<TenantSecretKey> {
  const select = () => db.select().from(tenantDataKeys).where(eq(tenantDataKeys.tenantId, tenantId));
  let [row] = await select();
  if (!row) {
    const key = {
      keyId: `${DATA_KEY_PREFIX}${randomBytes(12).toString("base64url")}`,
      dataKey: randomBytes(32),
    };
    [row] = await db
      .insert(tenantDataKeys)
      .values({ tenantId, keyId: key.keyId, ...wrapDataKey(keyring, tenantId, key) })
      .onConflictDoNothing()
      .returning();
    // another transaction made it first
    if (!row) [row] = await select();
    if (!row) throw new Error("the tenant's data key could not be made");
  }
  return cached(keyring, row);
}

/** The data key `keyId` names: from this process's cache, else read and unwrapped. */
async function dataKeyById(
  source: DataKeySource,
  keyring: TenantSecretKeyring,
  keyId: string,
): Promise<TenantSecretKey> {
  const hit = keyring.dataKeys.get(keyId);
  if (hit) return hit;
  const [row] = await readWith(source, (db) =>
    db.select().from(tenantDataKeys).where(eq(tenantDataKeys.keyId, keyId)),
  );
  if (!row)
    throw new TenantSecretError(
      "unknown_key",
      `tenant data key "${keyId}" does not exist (destroyed with its tenant, or of another installation)`,
    );
  return cached(keyring, row);
}

/**
 * Seals `value` under the data key of `tenantId` (made on first use), bound to `binding` (the tenant
 * id, or `user:<id>` for a user's authenticator) and `name`.
 */
export async function sealForTenant(
  db: Executor,
  keyring: TenantSecretKeyring,
  input: { tenantId: string; binding?: string; name: string; value: string },
): Promise<SealedSecret> {
  const key = await tenantDataKey(db, keyring, input.tenantId);
  return sealWith(key, input.binding ?? input.tenantId, input.name, input.value);
}

/**
 * Opens a sealed value: under the data key it names, or (a value sealed before data keys, or of a
 * user of no tenant) directly under the master key it names. Throws TenantSecretError.
 */
export async function openSealed(
  source: DataKeySource,
  keyring: TenantSecretKeyring,
  input: { binding: string; name: string; sealed: SealedSecret },
): Promise<string> {
  const { binding, name, sealed } = input;
  if (!isDataKeyId(sealed.keyId)) return openSecret(keyring, binding, name, sealed);
  return openWith(await dataKeyById(source, keyring, sealed.keyId), binding, name, sealed);
}

/** Tells every process (this one included, through its listener) to forget the tenant's data key. */
export async function announceDataKeyChange(db: Executor, tenantId: string): Promise<void> {
  await execute(db, sql`select pg_notify(${DATA_KEY_CHANNEL}, ${tenantId})`);
}

/**
 * Crypto-shredding: deletes the tenant's wrapped data key (its only copy), so nothing sealed under
 * it opens again, and evicts it here and in every process. Returns the destroyed key's id, or null
 * when the tenant had none (or it was destroyed already).
 */
export async function destroyTenantDataKey(
  db: Executor,
  keyring: TenantSecretKeyring | null,
  tenantId: string,
): Promise<string | null> {
  const [gone] = await db
    .delete(tenantDataKeys)
    .where(eq(tenantDataKeys.tenantId, tenantId))
    .returning({ keyId: tenantDataKeys.keyId });
  keyring?.dataKeys.evictTenant(tenantId);
  await announceDataKeyChange(db, tenantId);
  return gone?.keyId ?? null;
}
