import { describe, expect, test } from "bun:test";
import { eq, sql } from "drizzle-orm";
import { systemCtx } from "../../src/context.ts";
import { execute } from "../../src/db/client.ts";
import { tenantSecrets } from "../../src/db/schema/secrets.ts";
import {
  deleteTenantSecret,
  listTenantSecrets,
  putTenantSecret,
  readTenantSecret,
  rotateTenantSecrets,
  writeTenantSecret,
} from "../../src/providers/tenant-secret-store.ts";
import {
  parseTenantSecretKeys,
  TenantSecretError,
  type TenantSecretKeyring,
} from "../../src/security/tenant-secrets.ts";
import { useTestDatabase } from "../helpers/app.ts";
import { createTestDatabase } from "../helpers/database.ts";
import { createTenant, newMasterKey, writeLegacySecret } from "../helpers/identity.ts";

function ring(settings: Parameters<typeof parseTenantSecretKeys>[0]): TenantSecretKeyring {
  const { keyring } = parseTenantSecretKeys(settings);
  if (!keyring) throw new Error("bad keyring");
  return keyring;
}

const t = useTestDatabase();

const now = () => new Date("2026-11-01T00:00:00Z");

describe("tenant secrets in PostgreSQL", () => {
  test("put, list (no values), read server-side, replace, delete", async () => {
    const keys = ring({ KeyId: "k1", MasterKey: newMasterKey(), PreviousKeys: [] });
    const tenant = await createTenant(t.database.db);
    await writeTenantSecret(t.database.db, keys, tenant.id, {
      name: "sms.token",
      value: "tok-AAA",
      now: now(),
    });
    const [row] = await t.database.db
      .select()
      .from(tenantSecrets)
      .where(eq(tenantSecrets.tenantId, tenant.id));
    expect(row?.ciphertext).not.toContain("tok-AAA");
    expect(Buffer.from(row?.ciphertext ?? "", "base64").toString("utf8")).not.toContain("tok-AAA");

    const listed = await listTenantSecrets(t, systemCtx("test", tenant.id), { limit: 50 });
    // sealed under the tenant's own data key, which is wrapped under k1
    const [dataKey] = await execute<{ key_id: string; wrapping_key_id: string }>(
      t.database.db,
      sql`select key_id, wrapping_key_id from tenant_data_keys where tenant_id = ${tenant.id}`,
    );
    expect(dataKey?.wrapping_key_id).toBe("k1");
    expect(dataKey?.key_id).toStartWith("tdk_");
    expect(listed.items).toEqual([
      { name: "sms.token", keyId: dataKey?.key_id ?? "", createdAt: now(), updatedAt: now() },
    ]);
    expect(JSON.stringify(listed)).not.toContain("tok-AAA");
    expect(await readTenantSecret(t.database.db, keys, tenant.id, "sms.token")).toBe("tok-AAA");

    await writeTenantSecret(t.database.db, keys, tenant.id, {
      name: "sms.token",
      value: "tok-BBB",
      now: now(),
    });
    expect(await readTenantSecret(t.database.db, keys, tenant.id, "sms.token")).toBe("tok-BBB");
    await deleteTenantSecret(t, systemCtx("test", tenant.id), { name: "sms.token" });
    expect(await readTenantSecret(t.database.db, keys, tenant.id, "sms.token")).toBeNull();
    await expect(
      deleteTenantSecret(t, systemCtx("test", tenant.id), { name: "sms.token" }),
    ).rejects.toMatchObject({
      code: "not_found",
    });
  });

  test("a row copied to another tenant does not decrypt there", async () => {
    const keys = ring({ KeyId: "k1", MasterKey: newMasterKey(), PreviousKeys: [] });
    const a = await createTenant(t.database.db);
    const b = await createTenant(t.database.db);
    await writeTenantSecret(t.database.db, keys, a.id, { name: "api", value: "value-of-a", now: now() });
    await execute(
      t.database.db,
      sql`insert into tenant_secrets (tenant_id, name, key_id, nonce, ciphertext)
          select ${b.id}, name, key_id, nonce, ciphertext from tenant_secrets where tenant_id = ${a.id}`,
    );
    const error = await readTenantSecret(t.database.db, keys, b.id, "api").catch((e) => e);
    expect(error).toBeInstanceOf(TenantSecretError);
    expect(String(error.message)).not.toContain("value-of-a");
  });

  test("unknown tenant ids are 404 problems", async () => {
    const keys = ring({ KeyId: "k1", MasterKey: newMasterKey(), PreviousKeys: [] });
    for (const id of ["00000000-0000-4000-8000-000000000000", "not-a-uuid"]) {
      await expect(
        putTenantSecret(
          { database: t.database, clock: { now }, tenantSecretKeyring: keys },
          systemCtx("test", id),
          { name: "x", value: "y" },
        ),
      ).rejects.toMatchObject({
        code: "not_found",
      });
      await expect(listTenantSecrets(t, systemCtx("test", id), { limit: 50 })).rejects.toMatchObject({
        code: "not_found",
      });
    }
  });

  test("rotation re-seals legacy values (under a master key) under data keys, in batches, idempotently, leaving undecryptable rows alone", async () => {
    // a database of its own: rotation touches every row
    const own = await createTestDatabase();
    try {
      const db = own.database.db;
      const oldKey = newMasterKey();
      const before = ring({ KeyId: "old", MasterKey: oldKey, PreviousKeys: [] });
      const tenants = [await createTenant(db), await createTenant(db), await createTenant(db)];
      const values = new Map<string, string>();
      for (const [i, tenant] of tenants.entries())
        for (let n = 0; n < 4; n++) {
          const value = `value-${i}-${n}`;
          values.set(`${tenant.id}/s${n}`, value);
          await writeLegacySecret(db, before, tenant.id, `s${n}`, value);
        }
      // one row under a key id nobody has any more
      const lost = ring({ KeyId: "lost", MasterKey: newMasterKey(), PreviousKeys: [] });
      await writeLegacySecret(db, lost, tenants[0]?.id ?? "", "orphan", "gone");
      // legacy values open as they are before any rotation (nothing unreadable after the upgrade)
      expect(await readTenantSecret(db, before, tenants[1]?.id ?? "", "s2")).toBe("value-1-2");

      const newKey = newMasterKey();
      const after = ring({
        KeyId: "new",
        MasterKey: newKey,
        PreviousKeys: [{ KeyId: "old", MasterKey: oldKey }],
      });
      const batches: number[] = [];
      const rotation = { database: own.database, clock: { now }, tenantSecretKeyring: after };
      const first = await rotateTenantSecrets(rotation, systemCtx("test"), {
        batchSize: 5,
        onBatch: (n) => batches.push(n),
      });
      expect(first.rotated).toBe(12);
      expect(first.failed).toEqual([
        { tenantId: tenants[0]?.id ?? "", name: "orphan", keyId: "lost", reason: "unknown_key" },
      ]);
      expect(first.remaining).toBe(1);
      expect(batches.length).toBeGreaterThanOrEqual(3);
      expect(batches.every((n) => n <= 5)).toBe(true);

      const keyIds = await execute<{ key_id: string; n: number }>(
        db,
        sql`select case when key_id like 'tdk\_%' then 'data key' else key_id end as key_id, count(*)::int as n
            from tenant_secrets group by 1 order by 1`,
      );
      expect(keyIds).toEqual([
        { key_id: "data key", n: 12 },
        { key_id: "lost", n: 1 },
      ]);
      const wrapping = await execute<{ wrapping_key_id: string; n: number }>(
        db,
        sql`select wrapping_key_id, count(*)::int as n from tenant_data_keys group by 1`,
      );
      expect(wrapping).toEqual([{ wrapping_key_id: "new", n: 3 }]);
      // the new key alone now opens everything that was rotated (a fresh process: nothing cached)
      const newOnly = ring({ KeyId: "new", MasterKey: newKey, PreviousKeys: [] });
      for (const [where, value] of values) {
        const [tenantId = "", name = ""] = where.split("/");
        expect(await readTenantSecret(db, newOnly, tenantId, name)).toBe(value);
      }
      const second = await rotateTenantSecrets(rotation, systemCtx("test"), { batchSize: 5 });
      expect(second.rotated).toBe(0);
      expect(second.failed).toHaveLength(1);
    } finally {
      await own.drop();
    }
  });
});
