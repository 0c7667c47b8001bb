import { expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { sql } from "drizzle-orm";
import { ManualClock } from "../../src/clock.ts";
import { systemCtx } from "../../src/context.ts";
import { execute } from "../../src/db/client.ts";
import { readTenantSecret, writeTenantSecret } from "../../src/providers/tenant-secret-store.ts";
import { openSealed } from "../../src/security/tenant-data-keys.ts";
import { parseTenantSecretKeys, TenantSecretError } from "../../src/security/tenant-secrets.ts";
import { deleteTenantData } from "../../src/tenant-lifecycle/delete-tenant-data.ts";
import { relaxedLimits, useTestApp } from "../helpers/app.ts";
import { createTenant, writeLegacySecret } from "../helpers/identity.ts";

// Crypto-shredding (docs/secrets-and-storage.md, "Tenant data keys"): a copy of a tenant's sealed
// rows taken before its deletion (a backup) no longer opens afterwards, even with the master key.

const clock = new ManualClock("2026-11-27T10:00:00Z");
const masterKey = randomBytes(32).toString("base64");
const settings = {
  "Security:TenantSecrets:KeyId": "ts-shred",
  "Security:TenantSecrets:MasterKey": masterKey,
};
const h = useTestApp({ clock, settings: () => ({ ...relaxedLimits, ...settings }) });

/** A keyring as a fresh process (or an attacker with the master key and a backup) would have it. */
function freshKeyring() {
  const { keyring } = parseTenantSecretKeys({ KeyId: "ts-shred", MasterKey: masterKey, PreviousKeys: [] });
  if (!keyring) throw new Error("keyring");
  return keyring;
}

async function deleteNow(tenantId: string) {
  await execute(
    h.db,
    sql`update tenants set deletion_scheduled_for = ${clock.now().toISOString()}::timestamptz where id = ${tenantId}`,
  );
  expect(await deleteTenantData(h.deps, systemCtx("test"), { tenantId })).toBe("deleted");
}

test("a snapshot of a tenant's sealed rows taken before its deletion does not open after it, even with the master key", async () => {
  const keyring = h.deps.tenantSecretKeyring;
  if (!keyring) throw new Error("configured");
  const tenant = await createTenant(h.db);
  const value = `sk_live_${randomBytes(12).toString("hex")}`;
  await writeTenantSecret(h.db, keyring, tenant.id, { name: "payment.key", value, now: clock.now() });
  expect(await readTenantSecret(h.db, keyring, tenant.id, "payment.key")).toBe(value);

  // the backup: the sealed row and the wrapped data key, as raw SQL reads them
  const [row] = await execute<{ key_id: string; nonce: string; ciphertext: string }>(
    h.db,
    sql`select key_id, nonce, ciphertext from tenant_secrets where tenant_id = ${tenant.id}`,
  );
  if (!row) throw new Error("sealed");
  const sealed = { keyId: row.key_id, nonce: row.nonce, ciphertext: row.ciphertext };
  expect(JSON.stringify(row)).not.toContain(value);
  // before the deletion the snapshot opens with the master key alone
  expect(await openSealed(h.db, freshKeyring(), { binding: tenant.id, name: "payment.key", sealed })).toBe(
    value,
  );

  await deleteNow(tenant.id);

  const [left] = await execute<{ n: number }>(
    h.db,
    sql`select count(*)::int as n from tenant_data_keys where tenant_id = ${tenant.id}`,
  );
  expect(left?.n).toBe(0);
  // neither a fresh process with the master key nor this one (its cache evicted) opens the snapshot
  for (const ring of [freshKeyring(), keyring]) {
    const error = await openSealed(h.db, ring, { binding: tenant.id, name: "payment.key", sealed }).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(TenantSecretError);
    expect((error as TenantSecretError).reason).toBe("unknown_key");
    expect(String((error as Error).message)).not.toContain(value);
  }
  const [certificate] = await execute<{ details: Record<string, unknown> }>(
    h.db,
    sql`select details from audit_events where action = 'tenant.deleted' and target_id = ${tenant.id}`,
  );
  expect(certificate?.details).toMatchObject({ dataKeyDestroyed: true, masterSealedValues: 0 });
});

test("the certificate counts values still sealed the old way (directly under the master key)", async () => {
  const keyring = h.deps.tenantSecretKeyring;
  if (!keyring) throw new Error("configured");
  const tenant = await createTenant(h.db);
  await writeLegacySecret(h.db, keyring, tenant.id, "legacy", "legacy-value");
  // a legacy value opens as it is (nothing unreadable after the upgrade)
  expect(await readTenantSecret(h.db, keyring, tenant.id, "legacy")).toBe("legacy-value");
  await deleteNow(tenant.id);
  const [certificate] = await execute<{ details: Record<string, unknown> }>(
    h.db,
    sql`select details from audit_events where action = 'tenant.deleted' and target_id = ${tenant.id}`,
  );
  expect(certificate?.details).toMatchObject({ dataKeyDestroyed: false, masterSealedValues: 1 });
});

test("another process's cached data key is evicted through NOTIFY when the key is destroyed", async () => {
  const keyring = h.deps.tenantSecretKeyring;
  if (!keyring || !h.deps.database.sessions) throw new Error("configured, with LISTEN");
  const other = freshKeyring();
  await other.dataKeys.listen(h.deps.database, h.deps.logger);
  const tenant = await createTenant(h.db);
  await writeTenantSecret(h.db, keyring, tenant.id, { name: "x", value: "x-value", now: clock.now() });
  expect(await readTenantSecret(h.db, other, tenant.id, "x")).toBe("x-value");
  expect(other.dataKeys.size).toBe(1);
  await deleteNow(tenant.id);
  for (let i = 0; i < 100 && other.dataKeys.size > 0; i++) await Bun.sleep(20);
  expect(other.dataKeys.size).toBe(0);
});

test("pg_dump of the database shows no secret value in clear", async () => {
  const keyring = h.deps.tenantSecretKeyring;
  if (!keyring) throw new Error("configured");
  const tenant = await createTenant(h.db);
  const value = `dump-secret-${randomBytes(12).toString("hex")}`;
  await writeTenantSecret(h.db, keyring, tenant.id, { name: "dumped", value, now: clock.now() });
  const dump = Bun.spawnSync(["pg_dump", "--data-only", h.testDatabase.url], {
    stdout: "pipe",
    stderr: "pipe",
  });
  expect(dump.exitCode).toBe(0);
  const text = dump.stdout.toString();
  expect(text).toContain("tenant_data_keys");
  expect(text).not.toContain(value);
  expect(text).not.toContain(Buffer.from(value).toString("base64"));
  expect(text).not.toContain(masterKey);
});
