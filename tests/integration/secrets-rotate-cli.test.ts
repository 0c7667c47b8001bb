import { describe, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { sql } from "drizzle-orm";
import { execute } from "../../src/db/client.ts";
import { readTenantSecret, writeTenantSecret } from "../../src/providers/tenant-secret-store.ts";
import { parseTenantSecretKeys, type TenantSecretKeyring } from "../../src/security/tenant-secrets.ts";
import { useTestDatabase } from "../helpers/app.ts";
import { makeTestCertificates } from "../helpers/certificates.ts";
import { topologyEnv } from "../helpers/database.ts";
import { createTenant, writeLegacySecret } from "../helpers/identity.ts";

const root = join(import.meta.dir, "../..");
const oldKey = randomBytes(32).toString("base64");
const newKey = randomBytes(32).toString("base64");

function ring(keyId: string, masterKey: string): TenantSecretKeyring {
  const { keyring } = parseTenantSecretKeys({ KeyId: keyId, MasterKey: masterKey, PreviousKeys: [] });
  if (!keyring) throw new Error("keyring");
  return keyring;
}

function rotate(args: string[], env: Record<string, string>) {
  const proc = Bun.spawnSync(["bun", "src/secrets-rotate.ts", ...args], {
    cwd: root,
    env: {
      PATH: process.env.PATH ?? "/usr/bin:/bin",
      HOME: process.env.HOME ?? "/tmp",
      // the owner, as an operator runs it; through the pooler in transaction mode in the scaled topology
      ...topologyEnv(t.url),
      ...env,
    },
    stdout: "pipe",
    stderr: "pipe",
  });
  return { code: proc.exitCode, out: proc.stdout.toString() + proc.stderr.toString() };
}

const rotatedEnv = {
  PLINTH_TENANT_SECRET_KEY_ID: "new",
  PLINTH_TENANT_SECRET_MASTER_KEY: newKey,
  Security__TenantSecrets__PreviousKeys__0__KeyId: "old",
  Security__TenantSecrets__PreviousKeys__0__MasterKey: oldKey,
};

const t = useTestDatabase();

describe("bun run secrets:rotate", () => {
  test("--help and bad usage", () => {
    const help = rotate(["--help"], {});
    expect(help.code).toBe(0);
    expect(help.out).toContain("Exit codes");
    expect(rotate(["--batch-size", "0"], rotatedEnv).code).toBe(64);
    expect(rotate(["--what"], rotatedEnv).code).toBe(64);
  });

  test("an unusable master key fails with 1, naming the key and not the value", () => {
    const bad = randomBytes(16).toString("base64");
    const run = rotate([], { PLINTH_TENANT_SECRET_KEY_ID: "new", PLINTH_TENANT_SECRET_MASTER_KEY: bad });
    expect(run.code).toBe(1);
    expect(run.out).toContain("Security:TenantSecrets:MasterKey");
    expect(run.out).toContain("set by PLINTH_TENANT_SECRET_MASTER_KEY");
    expect(run.out).toContain("openssl rand -base64 32");
    expect(run.out).not.toContain(bad);
  });

  test("re-wraps data keys and re-seals legacy values (0), leaves ones no key opens (2), reruns idempotently; never prints values", async () => {
    const db = t.database.db;
    const tenant = await createTenant(db);
    const values = Array.from({ length: 7 }, (_, i) => `cli-secret-${i}-${randomBytes(6).toString("hex")}`);
    // four under the tenant's data key (wrapped under the old master key), three sealed the old way
    for (const [i, value] of values.entries())
      if (i < 4)
        await writeTenantSecret(db, ring("old", oldKey), tenant.id, {
          name: `s${i}`,
          value,
          now: new Date(),
        });
      else await writeLegacySecret(db, ring("old", oldKey), tenant.id, `s${i}`, value);

    const first = rotate(["--batch-size", "3"], rotatedEnv);
    expect(first.code).toBe(0);
    expect(first.out).toContain('"dataKeysRewrapped":1');
    expect(first.out).toContain('"rotated":3');
    const second = rotate([], rotatedEnv);
    expect(second.code).toBe(0);
    expect(second.out).toContain('"dataKeysRewrapped":0');
    expect(second.out).toContain('"rotated":0');
    // the new master key alone opens every value
    for (const [i, value] of values.entries())
      expect(await readTenantSecret(db, ring("new", newKey), tenant.id, `s${i}`)).toBe(value);

    await writeLegacySecret(
      db,
      ring("lost", randomBytes(32).toString("base64")),
      tenant.id,
      "orphan",
      "orphan-value",
    );
    const third = rotate([], rotatedEnv);
    expect(third.code).toBe(2);
    expect(third.out).toContain("orphan");
    for (const output of [first.out, second.out, third.out])
      for (const secret of [...values, "orphan-value", oldKey, newKey]) expect(output).not.toContain(secret);
    const keyIds = await execute<{ key_id: string }>(
      db,
      sql`select case when key_id like 'tdk\_%' then 'data key' else key_id end as key_id from tenant_secrets group by 1 order by 1`,
    );
    expect(keyIds.map((r) => r.key_id)).toEqual(["data key", "lost"]);
  });

  test("data keys still not under the current master key after the run (locked by another run) → 3, then 0 on a rerun", async () => {
    const db = t.database.db;
    // start from a table where every value is under a data key (earlier tests leave an orphan)
    await execute(db, sql`delete from tenant_secrets where key_id not like 'tdk\_%'`);
    const tenant = await createTenant(db);
    for (const name of ["free", "held"])
      await writeTenantSecret(db, ring("old", oldKey), tenant.id, {
        name,
        value: `v-${name}`,
        now: new Date(),
      });
    let held: ReturnType<typeof rotate> | undefined;
    await db.transaction(async (tx) => {
      // another run holds the tenant's data key: `skip locked` passes it by
      await execute(
        tx,
        sql`select tenant_id from tenant_data_keys where tenant_id = ${tenant.id} for update`,
      );
      held = rotate([], rotatedEnv);
    });
    expect(held?.code).toBe(3);
    expect(held?.out).toContain('"remaining":1');
    const rerun = rotate([], rotatedEnv);
    expect(rerun.code).toBe(0);
    expect(rerun.out).toContain('"dataKeysRewrapped":1');
    expect(await readTenantSecret(db, ring("new", newKey), tenant.id, "held")).toBe("v-held");
  });

  test("data protection: rotate now, list, revoke (4 when there is no such key)", () => {
    const certs = makeTestCertificates();
    try {
      const env = {
        PLINTH_DATA_PROTECTION_APPLICATION_NAME: "cli",
        PLINTH_DATA_PROTECTION_CERTIFICATE_PATH: certs.pfxPath,
        PLINTH_DATA_PROTECTION_CERTIFICATE_PASSWORD: certs.password,
      };
      expect(rotate(["--data-protection"], env).code).toBe(0);
      const listed = rotate(["--list-data-protection-keys"], env);
      expect(listed.code).toBe(0);
      const ids = [...listed.out.matchAll(/^([0-9a-f-]{36}) +rsa-oaep-sha256 .* usable$/gm)].map(
        (m) => m[1] ?? "",
      );
      expect(ids).toHaveLength(1);
      expect(rotate(["--revoke-data-protection-key", ids[0] ?? ""], env).code).toBe(0);
      expect(rotate(["--revoke-data-protection-key", ids[0] ?? ""], env).code).toBe(4);
      expect(rotate(["--data-protection", "--list-data-protection-keys"], env).code).toBe(64);
      const wrong = rotate(["--data-protection"], {
        ...env,
        PLINTH_DATA_PROTECTION_CERTIFICATE_PASSWORD: "wrong",
      });
      expect(wrong.code).toBe(1);
      expect(wrong.out).not.toContain(certs.password);
    } finally {
      certs.cleanup();
    }
  }, 30_000);

  test("a different master key under a key id already in use → 5 naming the key id, nothing rotated", () => {
    // the runs above recorded the fingerprints of `new` and `old`
    const other = randomBytes(32).toString("base64");
    const run = rotate([], { ...rotatedEnv, PLINTH_TENANT_SECRET_MASTER_KEY: other });
    expect(run.code).toBe(5);
    expect(run.out).toContain('"keyIds":["new"]');
    expect(run.out).toContain("restore the original key");
    for (const secret of [other, newKey, oldKey]) expect(run.out).not.toContain(secret);
    const retired = rotate([], {
      ...rotatedEnv,
      Security__TenantSecrets__PreviousKeys__0__MasterKey: randomBytes(32).toString("base64"),
    });
    expect(retired.code).toBe(5);
    expect(retired.out).toContain('"keyIds":["old"]');
    expect(rotate([], rotatedEnv).code).toBe(0);
  });

  test("data protection: an empty ring says so; ring keys no configured certificate unwraps → 5 until the old certificate is configured again", () => {
    const first = makeTestCertificates();
    const second = makeTestCertificates();
    const envOf = (certs: typeof first) => ({
      PLINTH_DATA_PROTECTION_APPLICATION_NAME: "cli",
      PLINTH_DATA_PROTECTION_CERTIFICATE_PATH: certs.pfxPath,
      PLINTH_DATA_PROTECTION_CERTIFICATE_PASSWORD: certs.password,
    });
    try {
      // the test above revoked its only key: nothing live is left
      const empty = rotate(["--list-data-protection-keys"], envOf(first));
      expect(empty.code).toBe(0);
      expect(empty.out).toContain("The data protection key ring is empty");
      expect(rotate(["--data-protection"], envOf(first)).code).toBe(0);
      const id =
        /^([0-9a-f-]{36}) /m.exec(rotate(["--list-data-protection-keys"], envOf(first)).out)?.[1] ?? "";
      // the certificate replaced without keeping the old one as a PreviousCertificate
      const replaced = rotate(["--data-protection"], envOf(second));
      expect(replaced.code).toBe(5);
      expect(replaced.out).toContain(id);
      expect(replaced.out).not.toContain(second.password);
      expect(rotate(["--list-data-protection-keys"], envOf(second)).out).toContain("NOT USABLE");
      // kept as a previous certificate, the ring opens again
      const kept = rotate(["--data-protection"], {
        ...envOf(second),
        Security__DataProtection__PreviousCertificates__0__Path: first.pfxPath,
        Security__DataProtection__PreviousCertificates__0__Password: first.password,
      });
      expect(kept.code).toBe(0);
    } finally {
      first.cleanup();
      second.cleanup();
    }
  }, 30_000);
});
