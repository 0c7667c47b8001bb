import { describe, expect, test } from "bun:test";
import { readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { isNull } from "drizzle-orm";
import {
  type Checkpoint,
  checkpointSigningKey,
  checkpointVerifyKey,
  openCheckpoint,
  signCheckpoint,
} from "../../src/audit/checkpoint.ts";
import { systemClock } from "../../src/clock.ts";
import { dataProtectionKeys } from "../../src/db/schema/data-protection.ts";
import { loadCertificate } from "../../src/security/certificates.ts";
import { DataProtection } from "../../src/security/data-protection.ts";
import { silentLogger } from "../helpers/cache.ts";
import { useKeyFolder } from "../helpers/key-folder.ts";

/**
 * docs/secrets-and-storage.md's runbooks for the data-protection certificate, the SMS code pepper
 * and the audit checkpoint signing key, run as written (the folder `/etc/plinth/keys` replaced by
 * this test's) against a Production configuration loaded from production.env: a payload protected
 * under the first certificate opens with the new certificate alone once the old one is retired.
 */

const keys = useKeyFolder();
const PAGE = "docs/secrets-and-storage.md";
const file = (path: string | undefined) => readFileSync(path ?? "", "utf8").replace(/\n$/, "");

/** Data protection as an API process builds it from production.env (its certificates from their files). */
function dataProtection(): DataProtection {
  const env = keys.env();
  const previous = env.Security__DataProtection__PreviousCertificates__0__Path
    ? [
        loadCertificate(
          env.Security__DataProtection__PreviousCertificates__0__Path,
          file(env.Security__DataProtection__PreviousCertificates__0__Password_FILE),
        ),
      ]
    : [];
  return new DataProtection({
    db: keys.t.database.db,
    applicationName: env.PLINTH_DATA_PROTECTION_APPLICATION_NAME ?? "",
    certificate: loadCertificate(
      env.PLINTH_DATA_PROTECTION_CERTIFICATE_PATH ?? "",
      file(env.PLINTH_DATA_PROTECTION_CERTIFICATE_PASSWORD_FILE),
    ),
    previousCertificates: previous,
    clock: systemClock,
    logger: silentLogger,
    keyLifetimeDays: 90,
  });
}

describe("key rotation runbooks as written", () => {
  test("data-protection certificate: publish, secrets:rotate --data-protection, retire; a payload of the first certificate opens with the new one alone", async () => {
    const { dir } = keys;
    const commands = keys.runbookCommands(PAGE, "### Runbook: rotate the data-protection certificate");
    expect(commands).toEqual([
      `bun run keys:generate --rotate data-protection --out ${dir}`,
      "bun run secrets:rotate --data-protection",
      `bun run keys:generate --rotate data-protection --retire --out ${dir}`,
    ]);
    const date = new Date().toISOString().slice(0, 10);
    const oldPassword = file(join(dir, "data-protection.password"));

    // a session cookie's payload protected under the first certificate, as the API protects it
    const payload = await dataProtection().forPurpose("cookie", "session").protect("session 42");
    await keys.restartApi();

    // 1. publish: the new certificate is current, the old one a previous certificate
    const publish = keys.run(commands[0] ?? "");
    expect(publish.code).toBe(0);
    const newPfx = join(dir, `data-protection-${date}.pfx`);
    const newPassword = join(dir, `data-protection-${date}.password`);
    expect(publish.out).toContain(`+ PLINTH_DATA_PROTECTION_CERTIFICATE_PATH=${newPfx}`);
    expect(publish.out).toContain(`+ PLINTH_DATA_PROTECTION_CERTIFICATE_PASSWORD_FILE=${newPassword}`);
    expect(publish.out).toContain(
      `+ Security__DataProtection__PreviousCertificates__0__Path=${join(dir, "data-protection.pfx")}`,
    );
    expect(publish.out).not.toContain(oldPassword);
    expect(publish.out).not.toContain(file(newPassword));
    for (const path of [newPfx, newPassword]) expect(statSync(path).mode & 0o777).toBe(0o600);
    // a second publish while this rotation is unfinished changes nothing
    const again = keys.run(commands[0] ?? "");
    expect(again.code).toBe(1);
    expect(again.out).toContain("secrets:rotate --data-protection");
    // 2. every replica restarted: the old payload still opens
    await keys.restartApi();
    expect(await dataProtection().forPurpose("cookie", "session").unprotect(payload)).toBe("session 42");

    // 3. every ring key wrapped with the new certificate
    const resealed = keys.run(commands[1] ?? "");
    expect(resealed.code).toBe(0);
    const thumbprint = loadCertificate(newPfx, file(newPassword)).certificate.fingerprint256;
    const ring = await keys.t.database.db
      .select()
      .from(dataProtectionKeys)
      .where(isNull(dataProtectionKeys.revokedAt));
    expect(ring.length).toBe(2); // the first key, and the one the rotation made
    expect(ring.map((k) => k.certificateThumbprint)).toEqual([thumbprint, thumbprint]);

    // 4. retire: the old certificate is gone from the settings; Production starts without it
    const retired = keys.run(commands[2] ?? "");
    expect(retired.code).toBe(0);
    expect(retired.out).toContain(join(dir, "data-protection.pfx"));
    expect(readFileSync(join(dir, "production.env"), "utf8")).not.toContain("PreviousCertificates");
    await keys.restartApi();
    const alone = dataProtection();
    expect(await alone.forPurpose("cookie", "session").unprotect(payload)).toBe("session 42");
    expect((await alone.listKeys()).every((k) => k.usable)).toBe(true);
    // out of order: nothing left to retire
    expect(keys.run(commands[2] ?? "").code).toBe(1);
  }, 180_000);

  test("SMS code pepper: replaced at once, Production starts with it; there is nothing to retire", async () => {
    const { dir } = keys;
    const commands = keys.runbookCommands(PAGE, "### Runbook: rotate the SMS code pepper");
    expect(commands).toEqual([`bun run keys:generate --rotate sms-code-pepper --out ${dir}`]);
    const oldPepper = file(keys.env().PLINTH_SMS_CODE_PEPPER_FILE);
    const rotated = keys.run(commands[0] ?? "");
    expect(rotated.code).toBe(0);
    const path = keys.env().PLINTH_SMS_CODE_PEPPER_FILE ?? "";
    expect(path).toBe(join(dir, `sms-code-pepper-${new Date().toISOString().slice(0, 10)}`));
    expect(rotated.out).toContain(`+ PLINTH_SMS_CODE_PEPPER_FILE=${path}`);
    expect(rotated.out).toContain(`destroy the old pepper: ${join(dir, "sms-code-pepper")}`);
    expect(rotated.out).not.toContain(oldPepper);
    expect(rotated.out).not.toContain(file(path));
    expect(file(path)).not.toBe(oldPepper);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    await keys.restartApi();
    expect(keys.run(`bun run keys:generate --rotate sms-code-pepper --retire --out ${dir}`).code).toBe(1);
  }, 60_000);

  test("audit checkpoint key: the new key signs under a new key id; a checkpoint of the old key no longer verifies", async () => {
    const { dir } = keys;
    const commands = keys.runbookCommands(PAGE, "### Runbook: rotate the audit checkpoint signing key");
    expect(commands).toEqual([`bun run keys:generate --rotate audit-checkpoint --out ${dir}`]);
    const before = keys.env();
    const checkpoint = (keyId: string): Checkpoint => ({
      format: "plinth.audit.checkpoint.v1",
      keyId,
      at: new Date().toISOString(),
      chains: [],
    });
    const oldSigned = signCheckpoint(
      checkpoint(before.Audit__Checkpoints__KeyId ?? ""),
      checkpointSigningKey(file(before.Audit__Checkpoints__SigningKey_FILE)),
    );
    const rotated = keys.run(commands[0] ?? "");
    expect(rotated.code).toBe(0);
    const after = keys.env();
    const newId = `audit-checkpoint-${new Date().toISOString().slice(0, 10)}-2`; // keys:generate made the first today
    expect(after.Audit__Checkpoints__KeyId).toBe(newId);
    expect(rotated.out).toContain(`+ Audit__Checkpoints__KeyId=${newId}`);
    expect(rotated.out).toContain("audit.checkpoint/run");
    expect(rotated.out).toContain(
      `destroy the old signing key: ${before.Audit__Checkpoints__SigningKey_FILE}`,
    );
    await keys.restartApi();
    const signingKey = file(after.Audit__Checkpoints__SigningKey_FILE);
    const verifyKey = checkpointVerifyKey({ SigningKey: signingKey });
    if (!verifyKey) throw new Error("no verify key");
    const newSigned = signCheckpoint(checkpoint(newId), checkpointSigningKey(signingKey));
    expect(openCheckpoint(JSON.stringify(newSigned), verifyKey)).toHaveProperty("checkpoint");
    expect(openCheckpoint(JSON.stringify(oldSigned), verifyKey)).toHaveProperty("error");
    expect(statSync(join(dir, `${newId}.pub.pem`)).mode & 0o777).toBe(0o600);
  }, 60_000);
});
