import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { ManualClock } from "../../src/clock.ts";
import { loadConfig } from "../../src/config/load.ts";
import { execute } from "../../src/db/client.ts";
import { createRedactor } from "../../src/redact.ts";
import { loadCertificate } from "../../src/security/certificates.ts";
import {
  createDataProtection,
  DataProtection,
  DataProtectionError,
} from "../../src/security/data-protection.ts";
import { createLogger } from "../../src/telemetry/logger.ts";
import { makeTestCertificates, type TestCertificates } from "../helpers/certificates.ts";
import { createTestDatabase, type TestDatabase } from "../helpers/database.ts";

const DAY = 86_400_000;
let certs: TestCertificates;
let otherCerts: TestCertificates;
const lines: string[] = [];
const logger = createLogger({
  level: "debug",
  redactor: createRedactor([]),
  write: (line) => lines.push(line),
});

beforeAll(() => {
  certs = makeTestCertificates();
  otherCerts = makeTestCertificates("other");
});
afterAll(() => {
  certs.cleanup();
  otherCerts.cleanup();
});

/** Each test gets its own database: the key ring is global to a database. */
async function withDatabase(run: (t: TestDatabase) => Promise<void>): Promise<void> {
  const t = await createTestDatabase();
  try {
    await run(t);
  } finally {
    await t.drop();
  }
}

function ring(
  t: TestDatabase,
  clock: ManualClock,
  options: { app?: string; cert?: "pfx" | "pem" | "other" | null } = {},
) {
  const cert = options.cert === undefined ? "pfx" : options.cert;
  const certificate =
    cert === null
      ? null
      : cert === "pem"
        ? loadCertificate(certs.encryptedPemPath, certs.password)
        : cert === "other"
          ? loadCertificate(otherCerts.pfxPath, otherCerts.password)
          : loadCertificate(certs.pfxPath, certs.password);
  return new DataProtection({
    db: t.database.db,
    applicationName: options.app ?? "plinth-test",
    certificate,
    clock,
    logger,
    keyLifetimeDays: 90,
  });
}

/** After a certificate change: the other certificate current, the first one kept as a previous one. */
function changedRing(t: TestDatabase, clock: ManualClock) {
  return new DataProtection({
    db: t.database.db,
    applicationName: "plinth-test",
    certificate: loadCertificate(otherCerts.pfxPath, otherCerts.password),
    previousCertificates: [loadCertificate(certs.pfxPath, certs.password)],
    clock,
    logger,
    keyLifetimeDays: 90,
  });
}

async function refused(promise: Promise<unknown>): Promise<boolean> {
  try {
    await promise;
    return false;
  } catch (error) {
    return error instanceof DataProtectionError;
  }
}

describe("data protection key ring", () => {
  test("round trip; keys are stored wrapped with the certificate and unwrap with the PEM form of it too", () =>
    withDatabase(async (t) => {
      const clock = new ManualClock("2026-01-01T00:00:00Z");
      const cookies = ring(t, clock).forPurpose("cookie", "session");
      const payload = await cookies.protect("session-id-123");
      expect(payload).toMatch(/^[A-Za-z0-9_-]+$/);
      expect(payload).not.toContain("session-id-123");
      expect(await cookies.unprotect(payload)).toBe("session-id-123");

      const [key] = await execute<{
        protection: string;
        key_material: string;
        certificate_thumbprint: string;
      }>(
        t.database.db,
        sql`select protection, key_material, certificate_thumbprint from data_protection_keys`,
      );
      expect(key?.protection).toBe("rsa-oaep-sha256");
      expect(Buffer.from(key?.key_material ?? "", "base64")).toHaveLength(256); // RSA-2048 block, not a bare 32-byte key
      // a fresh process (new ring object) with the same certificate in PEM form opens it
      const again = ring(t, clock, { cert: "pem" }).forPurpose("cookie", "session");
      expect(await again.unprotect(payload)).toBe("session-id-123");
    }));

  test("purposes and application names are isolated; tampering and garbage are refused", () =>
    withDatabase(async (t) => {
      const clock = new ManualClock("2026-01-01T00:00:00Z");
      const app = ring(t, clock, { app: "plinth-a" });
      const payload = await app.forPurpose("cookie").protect("x");
      expect(await refused(app.forPurpose("reset-token").unprotect(payload))).toBe(true);
      expect(await refused(ring(t, clock, { app: "plinth-b" }).forPurpose("cookie").unprotect(payload))).toBe(
        true,
      );
      const bytes = Buffer.from(payload, "base64url");
      bytes[bytes.length - 20] = (bytes[bytes.length - 20] ?? 0) ^ 1;
      expect(await refused(app.forPurpose("cookie").unprotect(bytes.toString("base64url")))).toBe(true);
      for (const garbage of ["", "!!!", "AAAA", Buffer.alloc(60).toString("base64url")])
        expect(await refused(app.forPurpose("cookie").unprotect(garbage))).toBe(true);
      // another certificate cannot unwrap this ring's key
      expect(await refused(ring(t, clock, { cert: "other" }).forPurpose("cookie").unprotect(payload))).toBe(
        true,
      );
    }));

  test("keys rotate after KeyLifetimeDays; old payloads keep opening; processes share one new key", () =>
    withDatabase(async (t) => {
      const clock = new ManualClock("2026-01-01T00:00:00Z");
      const one = ring(t, clock);
      const two = ring(t, clock);
      const first = await one.forPurpose("cookie").protect("first");
      const keyOf = (p: string) => Buffer.from(p, "base64url").subarray(1, 17).toString("hex");
      expect(keyOf(await two.forPurpose("cookie").protect("same key"))).toBe(keyOf(first));

      clock.advance(89 * DAY);
      expect(keyOf(await one.forPurpose("cookie").protect("still"))).toBe(keyOf(first));
      clock.advance(2 * DAY);
      const [a, b] = await Promise.all([
        one.forPurpose("cookie").protect("after one"),
        two.forPurpose("cookie").protect("after two"),
      ]);
      expect(keyOf(a)).not.toBe(keyOf(first));
      expect(keyOf(a)).toBe(keyOf(b));
      expect(await two.forPurpose("cookie").unprotect(first)).toBe("first");
      expect(await one.forPurpose("cookie").unprotect(b)).toBe("after two");
      const keys = await one.listKeys();
      expect(keys).toHaveLength(2);
      expect(keys.every((k) => k.usable && k.protection === "rsa-oaep-sha256")).toBe(true);

      const rotated = await one.rotateNow();
      const c = await one.forPurpose("cookie").protect("after rotate");
      expect(keyOf(c)).toBe(rotated.replace(/-/g, ""));
      // another process opens it (an unknown key id reloads its ring, at most once a second) and
      // protects with it after its next refresh
      clock.advance(1_000);
      expect(await two.forPurpose("cookie").unprotect(c)).toBe("after rotate");
      clock.advance(6 * 60_000);
      expect(keyOf(await two.forPurpose("cookie").protect("later"))).toBe(rotated.replace(/-/g, ""));
      expect(await one.forPurpose("cookie").unprotect(a)).toBe("after one");
    }));

  test("a ring loaded while the clock read ahead is read again once the clock is put back, not when it catches up", () =>
    withDatabase(async (t) => {
      const start = "2026-01-01T00:00:00Z";
      const clock = new ManualClock(start);
      const one = ring(t, clock);
      const two = ring(t, clock);
      clock.advance(11 * 60_000);
      const ahead = await two.forPurpose("cookie").protect("loaded ahead");
      clock.set(start);
      // another process's new key (its session cookie) opens here a second later, as it would have
      const rotated = await one.rotateNow();
      const made = await one.forPurpose("cookie").protect("after rotate");
      clock.advance(1_000);
      expect(await two.forPurpose("cookie").unprotect(made)).toBe("after rotate");
      // and a key revoked there stops opening here at the next refresh
      const keyOfAhead = (await two.listKeys()).find((k) => k.id !== rotated)?.id ?? "";
      expect(await one.revokeKey(keyOfAhead)).toBe(true);
      clock.advance(5 * 60_000);
      expect(await refused(two.forPurpose("cookie").unprotect(ahead))).toBe(true);
    }));

  test("certificate change: a retired certificate still unwraps old keys; new payloads use the new certificate", () =>
    withDatabase(async (t) => {
      const clock = new ManualClock("2026-01-01T00:00:00Z");
      const before = ring(t, clock).forPurpose("cookie");
      const old = await before.protect("under the old certificate");
      const after = changedRing(t, clock);
      expect(await after.forPurpose("cookie").unprotect(old)).toBe("under the old certificate");
      const fresh = await after.forPurpose("cookie").protect("new");
      const keyOf = (p: string) => Buffer.from(p, "base64url").subarray(1, 17).toString("hex");
      expect(keyOf(fresh)).not.toBe(keyOf(old));
      const keys = await after.listKeys();
      expect(keys.map((k) => k.usable)).toEqual([true, true]);
      // once the old certificate is dropped from the configuration, old payloads stop opening
      expect(await refused(ring(t, clock, { cert: "other" }).forPurpose("cookie").unprotect(old))).toBe(true);
      expect(await ring(t, clock, { cert: "other" }).forPurpose("cookie").unprotect(fresh)).toBe("new");
    }));

  test("re-wrap after a certificate change: the old keys move to the new certificate, whose ring then opens old payloads alone", () =>
    withDatabase(async (t) => {
      const clock = new ManualClock("2026-01-01T00:00:00Z");
      const old = await ring(t, clock).forPurpose("cookie").protect("under the old certificate");
      // without the old certificate nothing can be re-wrapped: the key stays where it was
      expect(await ring(t, clock, { cert: "other" }).rewrapKeys()).toEqual({ rewrapped: 0, remaining: 1 });
      const changed = changedRing(t, clock);
      expect(await changed.rewrapKeys()).toEqual({ rewrapped: 1, remaining: 0 });
      expect(await changed.rewrapKeys()).toEqual({ rewrapped: 0, remaining: 0 });
      const alone = ring(t, clock, { cert: "other" });
      expect(await alone.forPurpose("cookie").unprotect(old)).toBe("under the old certificate");
      expect((await alone.listKeys()).map((k) => k.usable)).toEqual([true]);
      // and the first certificate alone no longer unwraps it
      expect(await refused(ring(t, clock).forPurpose("cookie").unprotect(old))).toBe(true);
    }));

  test("a revoked key no longer opens its payloads; the next protect makes a new key", () =>
    withDatabase(async (t) => {
      const clock = new ManualClock("2026-01-01T00:00:00Z");
      const dp = ring(t, clock);
      const payload = await dp.forPurpose("cookie").protect("x");
      const [key] = await dp.listKeys();
      expect(await dp.revokeKey(key?.id ?? "")).toBe(true);
      expect(await dp.revokeKey(key?.id ?? "")).toBe(false);
      expect(await refused(dp.forPurpose("cookie").unprotect(payload))).toBe(true);
      const fresh = await dp.forPurpose("cookie").protect("y");
      expect(await dp.forPurpose("cookie").unprotect(fresh)).toBe("y");
      expect((await dp.listKeys()).map((k) => k.id)).not.toContain(key?.id);
    }));

  test("Development without a certificate: bare keys and a loud warning; a protected ring ignores bare keys", () =>
    withDatabase(async (t) => {
      const clock = new ManualClock("2026-01-01T00:00:00Z");
      const captured: string[] = [];
      const config = loadConfig({ env: { DATABASE_URL: t.url }, configDir: "/nonexistent" });
      const dp = createDataProtection(config, {
        db: t.database.db,
        clock,
        logger: createLogger({ level: "info", redactor: createRedactor([]), write: (l) => captured.push(l) }),
      });
      expect(dp.protectedAtRest).toBe(false);
      expect(captured.some((l) => l.includes('"level":"warn"') && l.includes("NOT PROTECTED AT REST"))).toBe(
        true,
      );
      const payload = await dp.forPurpose("cookie").protect("dev");
      expect(await dp.forPurpose("cookie").unprotect(payload)).toBe("dev");
      const [row] = await execute<{ protection: string }>(
        t.database.db,
        sql`select protection from data_protection_keys`,
      );
      expect(row?.protection).toBe("none");

      const protectedRing = ring(t, clock, { app: "plinth" });
      expect(await refused(protectedRing.forPurpose("cookie").unprotect(payload))).toBe(true);
      const fresh = await protectedRing.forPurpose("cookie").protect("prod");
      expect(await protectedRing.forPurpose("cookie").unprotect(fresh)).toBe("prod");
      expect((await protectedRing.listKeys()).map((k) => [k.protection, k.usable])).toEqual([
        ["none", false],
        ["rsa-oaep-sha256", true],
      ]);
    }));

  test("from configuration: PKCS#12 path and password, application name, key lifetime", () =>
    withDatabase(async (t) => {
      const clock = new ManualClock("2026-01-01T00:00:00Z");
      const config = loadConfig({
        env: {
          DATABASE_URL: t.url,
          PLINTH_DATA_PROTECTION_APPLICATION_NAME: "from-config",
          PLINTH_DATA_PROTECTION_CERTIFICATE_PATH: certs.pfxPath,
          PLINTH_DATA_PROTECTION_CERTIFICATE_PASSWORD: certs.password,
          Security__DataProtection__KeyLifetimeDays: "7",
        },
        configDir: "/nonexistent",
      });
      const dp = createDataProtection(config, { db: t.database.db, clock, logger });
      expect(dp.protectedAtRest).toBe(true);
      expect(dp.applicationName).toBe("from-config");
      await dp.forPurpose("p").protect("x");
      const [key] = await dp.listKeys();
      expect(((key?.expiresAt.getTime() ?? 0) - (key?.activatesAt.getTime() ?? 0)) / DAY).toBe(7);
      expect(config.secretValues).toContain(certs.password);
    }));
});

test("nothing logged by the key ring holds key material", () => {
  const joined = lines.join("\n");
  expect(joined).not.toContain("BEGIN");
  expect(joined).not.toContain(certs.password);
});
