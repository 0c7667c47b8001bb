// `bun bench/secrets-crypto.ts`: tenant-secret AES-GCM, data-protection protect/unprotect, and the
// rotation command's throughput over N secrets in a scratch PostgreSQL database.
import { randomBytes, randomUUID } from "node:crypto";
import { ManualClock, systemClock } from "../src/clock.ts";
import { systemCtx } from "../src/context.ts";
import { rotateTenantSecrets, writeTenantSecret } from "../src/providers/tenant-secret-store.ts";
import { createRedactor } from "../src/redact.ts";
import { loadCertificate } from "../src/security/certificates.ts";
import { DataProtection } from "../src/security/data-protection.ts";
import { openSecret, parseTenantSecretKeys, sealSecret } from "../src/security/tenant-secrets.ts";
import { createLogger } from "../src/telemetry/logger.ts";
import { makeTestCertificates } from "../tests/helpers/certificates.ts";
import { createTestDatabase } from "../tests/helpers/database.ts";
import { createTenant } from "../tests/helpers/identity.ts";

const N = Number(process.env.BENCH_SECRETS ?? 5000);
const key = (id: string, master = randomBytes(32).toString("base64")) => {
  const { keyring } = parseTenantSecretKeys({ KeyId: id, MasterKey: master, PreviousKeys: [] });
  if (!keyring) throw new Error("keyring");
  return { keyring, master };
};
const rate = (count: number, ms: number) => `${Math.round((count / ms) * 1000).toLocaleString("en")}/s`;

const { keyring } = key("k1");
const tenant = randomUUID();
let t0 = performance.now();
const sealed = [];
for (let i = 0; i < 100_000; i++)
  sealed.push(
    sealSecret(keyring, tenant, "name", "a-64-byte-provider-token-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"),
  );
const sealMs = performance.now() - t0;
t0 = performance.now();
for (const s of sealed) openSecret(keyring, tenant, "name", s);
console.log(`tenant secret seal ${rate(100_000, sealMs)}, open ${rate(100_000, performance.now() - t0)}`);

const t = await createTestDatabase({ poolSize: 4 });
const certs = makeTestCertificates();
try {
  const logger = createLogger({ level: "error", redactor: createRedactor([]) });
  const dp = new DataProtection({
    db: t.database.db,
    applicationName: "bench",
    certificate: loadCertificate(certs.pfxPath, certs.password),
    clock: new ManualClock(),
    logger,
    keyLifetimeDays: 90,
  });
  const p = dp.forPurpose("cookie");
  await p.protect("warm-up");
  const payloads: string[] = [];
  t0 = performance.now();
  for (let i = 0; i < 50_000; i++) payloads.push(await p.protect(`session-${i}`));
  const protectMs = performance.now() - t0;
  t0 = performance.now();
  for (const payload of payloads) await p.unprotect(payload);
  console.log(
    `data protection protect ${rate(50_000, protectMs)}, unprotect ${rate(50_000, performance.now() - t0)} (cookie payload ${payloads[0]?.length} chars)`,
  );

  const old = key("old");
  const tenants = await Promise.all(Array.from({ length: 10 }, () => createTenant(t.database.db)));
  for (let i = 0; i < N; i++) {
    const owner = tenants[i % tenants.length];
    if (owner)
      await writeTenantSecret(t.database.db, old.keyring, owner.id, {
        name: `s${i}`,
        value: `v${i}`,
        now: new Date(),
      });
  }
  const next = parseTenantSecretKeys({
    KeyId: "new",
    MasterKey: randomBytes(32).toString("base64"),
    PreviousKeys: [{ KeyId: "old", MasterKey: old.master }],
  }).keyring;
  if (!next) throw new Error("keyring");
  const rotation = { database: t.database, clock: systemClock, tenantSecretKeyring: next };
  t0 = performance.now();
  const result = await rotateTenantSecrets(rotation, systemCtx("bench"), { batchSize: 100 });
  const rotateMs = performance.now() - t0;
  t0 = performance.now();
  await rotateTenantSecrets(rotation, systemCtx("bench"), { batchSize: 100 });
  console.log(
    `rotation of ${result.rotated} secrets (batch 100): ${Math.round(rotateMs)} ms = ${rate(result.rotated, rotateMs)}; idempotent rerun ${Math.round(performance.now() - t0)} ms`,
  );
} finally {
  certs.cleanup();
  await t.drop();
}
