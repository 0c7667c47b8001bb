import { expect, test } from "bun:test";
import { readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { eq } from "drizzle-orm";
import { openTotpSecret, sealedFor } from "../../src/auth/totp-factor.ts";
import { tenantDataKeys, tenantSecrets, totpFactors } from "../../src/db/schema/index.ts";
import { readTenantSecret } from "../../src/providers/tenant-secret-store.ts";
import { parseTenantSecretKeys, sealSecret } from "../../src/security/tenant-secrets.ts";
import { createTenant, createUser } from "../helpers/identity.ts";
import { useKeyFolder } from "../helpers/key-folder.ts";

/**
 * docs/secrets-and-storage.md's "rotate the tenant-secret master key", run as written: its commands
 * are read from the page (the folder `/etc/plinth/keys` replaced by this test's) against a Production
 * configuration loaded from production.env; secrets sealed under the first key end under the new
 * one and open with it alone once the old key is retired, TOTP authenticators (sealed under the
 * same keys) too.
 */

const keys = useKeyFolder();
const { dir } = keys;
const t = keys.t;
const run = (command: string) => keys.run(command);
const restartApi = () => keys.restartApi();

/** The tenant-secret lines of production.env as the API reads them (keys from their files). */
function keyring() {
  const env = keys.env();
  const file = (path: string | undefined) => readFileSync(path ?? "", "utf8").trim();
  const previous = env.Security__TenantSecrets__PreviousKeys__0__KeyId
    ? [
        {
          KeyId: env.Security__TenantSecrets__PreviousKeys__0__KeyId,
          MasterKey: file(env.Security__TenantSecrets__PreviousKeys__0__MasterKey_FILE),
        },
      ]
    : [];
  const { keyring } = parseTenantSecretKeys({
    KeyId: env.PLINTH_TENANT_SECRET_KEY_ID,
    MasterKey: file(env.PLINTH_TENANT_SECRET_MASTER_KEY_FILE),
    PreviousKeys: previous,
  });
  if (!keyring) throw new Error("production.env holds no usable tenant-secret keys");
  return keyring;
}

test("the tenant-secret key rotation runbook as written: publish, secrets:rotate, retire; every secret opens with the new key alone", async () => {
  const commands = keys.runbookCommands(
    "docs/secrets-and-storage.md",
    "### Runbook: rotate the tenant-secret master key",
  );
  expect(commands).toEqual([
    `bun run keys:generate --rotate tenant-secrets --out ${dir}`,
    "bun run secrets:rotate",
    `bun run keys:generate --rotate tenant-secrets --retire --out ${dir}`,
  ]);
  const date = new Date().toISOString().slice(0, 10);
  const oldId = `ts-${date}`;
  const newId = `ts-${date}-2`; // keys:generate made ts-<date> today

  // secrets sealed under the first key as the API sealed them before tenant data keys
  const before = keyring();
  expect(before.current.keyId).toBe(oldId);
  const tenant = await createTenant(t.database.db);
  const values = new Map(
    ["smtp-password", "payment-api-key", "sms-token"].map((n) => [n, crypto.randomUUID()]),
  );
  for (const [name, value] of values)
    await t.database.db
      .insert(tenantSecrets)
      .values({ tenantId: tenant.id, name, ...sealSecret(before, tenant.id, name, value) });
  // and a user's TOTP authenticator, sealed the old way too (bound to the user)
  const { id: userId } = await createUser(t.database.db, tenant.id);
  const totpSecret = "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP";
  const { binding, name: totpName } = sealedFor(userId);
  const sealedTotp = sealSecret(before, binding, totpName, totpSecret);
  await t.database.db.insert(totpFactors).values({
    userId,
    secretKeyId: sealedTotp.keyId,
    secretNonce: sealedTotp.nonce,
    secretCiphertext: sealedTotp.ciphertext,
  });
  await restartApi(); // records the first key's fingerprint

  // 1. publish: the new key is current, the old one a previous key
  const oldKey = readFileSync(join(dir, `tenant-secrets-${date}.key`), "utf8").trim();
  const publish = run(commands[0] ?? "");
  expect(publish.code).toBe(0);
  expect(publish.out).toContain(`+ PLINTH_TENANT_SECRET_KEY_ID=${newId}`);
  expect(publish.out).toContain(`+ Security__TenantSecrets__PreviousKeys__0__KeyId=${oldId}`);
  expect(publish.out).not.toContain(oldKey);
  expect(publish.out).not.toContain(readFileSync(join(dir, `tenant-secrets-${date}-2.key`), "utf8").trim());
  expect(statSync(join(dir, `tenant-secrets-${date}-2.key`)).mode & 0o777).toBe(0o600);
  expect(statSync(join(dir, "production.env")).mode & 0o777).toBe(0o600);
  // a second publish while this rotation is unfinished changes nothing; retiring before is refused too
  const again = run(commands[0] ?? "");
  expect(again.code).toBe(1);
  expect(again.out).toContain("secrets:rotate");
  // 2. every replica restarted with the settings
  await restartApi();

  // 3. every secret re-sealed under the new key
  const rotated = run(commands[1] ?? "");
  expect(rotated.code).toBe(0);
  const rows = await t.database.db.select().from(tenantSecrets).where(eq(tenantSecrets.tenantId, tenant.id));
  // the values sealed the old way (directly under the master key) are under the tenant's data key now,
  // and the data key is wrapped under the new master key
  const [dataKey] = await t.database.db
    .select()
    .from(tenantDataKeys)
    .where(eq(tenantDataKeys.tenantId, tenant.id));
  expect(dataKey?.keyId).toStartWith("tdk_");
  expect(dataKey?.wrappingKeyId).toBe(newId);
  expect(new Set(rows.map((r) => r.keyId))).toEqual(new Set([dataKey?.keyId ?? "?"]));

  // 5. retire: the old key is gone from the settings; the API starts and every secret opens without it
  const retired = run(commands[2] ?? "");
  expect(retired.code).toBe(0);
  expect(retired.out).toContain(join(dir, `tenant-secrets-${date}.key`));
  expect(readFileSync(join(dir, "production.env"), "utf8")).not.toContain("PreviousKeys");
  await restartApi();
  const after = keyring();
  expect([...after.byId.keys()]).toEqual([newId]);
  for (const row of rows)
    expect(await readTenantSecret(t.database.db, after, tenant.id, row.name)).toBe(
      values.get(row.name) ?? "",
    );
  const [factor] = await t.database.db.select().from(totpFactors).where(eq(totpFactors.userId, userId));
  // a tenant user's authenticator: under the tenant's data key too
  expect(factor?.secretKeyId).toBe(dataKey?.keyId ?? "");
  if (!factor) throw new Error("the factor");
  expect(await openTotpSecret(t.database.db, after, factor)).toBe(totpSecret);
  // out of order: nothing left to retire
  expect(run(commands[2] ?? "").code).toBe(1);
}, 180_000);
