import { generateKeyPairSync, randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { dataProtectionCertificate } from "./data-protection-certificate.ts";
import { envValue, nextDatedSuffix, writeKeyFile } from "./env-file-keys.ts";
import type { RotatedKey } from "./key-rotation-steps.ts";

/**
 * The keys `keys:generate --rotate <name>` rotates besides JWT: each names its lines in
 * production.env, how its next key is made and, where the configuration keeps a previous one, the
 * command that re-seals what the old key protected (docs/secrets-and-storage.md has the runbooks).
 */

/** A suffix none of `names(suffix)` exists under in `dir` and whose key id `taken` does not hold. */
const freeSuffix = (dir: string, now: Date, names: (s: string) => string[], taken: (s: string) => boolean) =>
  nextDatedSuffix(now, (s) => !taken(s) && names(s).every((n) => !existsSync(join(dir, n))));

/** An Ed25519 key pair as PEM (PKCS#8, SPKI): the audit checkpoint signing key. */
export function checkpointKeyPair(): { privatePem: string; publicPem: string } {
  const pair = generateKeyPairSync("ed25519");
  return {
    privatePem: pair.privateKey.export({ type: "pkcs8", format: "pem" }).toString(),
    publicPem: pair.publicKey.export({ type: "spki", format: "pem" }).toString(),
  };
}

const tenantSecrets: RotatedKey = {
  name: "tenant-secrets",
  label: "master key",
  variables: [
    { name: "PLINTH_TENANT_SECRET_KEY_ID" },
    { name: "PLINTH_TENANT_SECRET_MASTER_KEY_FILE", file: true },
  ],
  previous: {
    prefix: "Security__TenantSecrets__PreviousKeys__",
    fields: ["KeyId", "MasterKey_FILE"],
    reseal: "bun run secrets:rotate",
  },
  next({ dir, now, current }) {
    const suffix = freeSuffix(
      dir,
      now,
      (s) => [`tenant-secrets-${s}.key`],
      (s) => `ts-${s}` === current[0],
    );
    const file = writeKeyFile(dir, `tenant-secrets-${suffix}.key`, `${randomBytes(32).toString("base64")}\n`);
    return { values: [`ts-${suffix}`, file], written: [file] };
  },
  afterRestart: (next, old) => `new secrets are sealed under ${next[0]}, those under ${old[0]} still open`,
  runbook: "docs/secrets-and-storage.md",
};

const dataProtection: RotatedKey = {
  name: "data-protection",
  label: "certificate",
  variables: [
    { name: "PLINTH_DATA_PROTECTION_CERTIFICATE_PATH", file: true },
    { name: "PLINTH_DATA_PROTECTION_CERTIFICATE_PASSWORD_FILE", file: true },
  ],
  previous: {
    prefix: "Security__DataProtection__PreviousCertificates__",
    fields: ["Path", "Password_FILE"],
    reseal: "bun run secrets:rotate --data-protection",
  },
  next({ dir, now, lines }) {
    const names = (s: string) => [`data-protection-${s}.pfx`, `data-protection-${s}.password`];
    const [pfx = "", passwordFile = ""] = names(freeSuffix(dir, now, names, () => false));
    const password = randomBytes(24).toString("base64url");
    const host = envValue([...lines], "Tenancy__Resolution__PlatformHost") ?? "plinth";
    const certificate = writeKeyFile(
      dir,
      pfx,
      dataProtectionCertificate(`${host} data protection`, password, now),
    );
    const passwordPath = writeKeyFile(dir, passwordFile, `${password}\n`);
    return { values: [certificate, passwordPath], written: [certificate, passwordPath] };
  },
  afterRestart: () =>
    "new ring keys are wrapped with the new certificate, those wrapped with the old one still unwrap",
  runbook: "docs/secrets-and-storage.md",
};

const smsCodePepper: RotatedKey = {
  name: "sms-code-pepper",
  label: "pepper",
  variables: [{ name: "PLINTH_SMS_CODE_PEPPER_FILE", file: true }],
  next({ dir, now }) {
    const suffix = freeSuffix(
      dir,
      now,
      (s) => [`sms-code-pepper-${s}`],
      () => false,
    );
    const file = writeKeyFile(dir, `sms-code-pepper-${suffix}`, `${randomBytes(32).toString("base64url")}\n`);
    return { values: [file], written: [file] };
  },
  afterRestart: () =>
    "SMS and e-mail sign-in codes sent before no longer verify (they live minutes); users ask for a new one",
  runbook: "docs/runbooks/key-rotation.md",
};

const auditCheckpoint: RotatedKey = {
  name: "audit-checkpoint",
  label: "signing key",
  variables: [
    { name: "Audit__Checkpoints__KeyId" },
    { name: "Audit__Checkpoints__SigningKey_FILE", file: true },
  ],
  next({ dir, now, current }) {
    const names = (s: string) => [`audit-checkpoint-${s}.key.pem`, `audit-checkpoint-${s}.pub.pem`];
    const suffix = freeSuffix(dir, now, names, (s) => `audit-checkpoint-${s}` === current[0]);
    const [privateName = "", publicName = ""] = names(suffix);
    const pair = checkpointKeyPair();
    const signingKey = writeKeyFile(dir, privateName, pair.privatePem);
    return {
      values: [`audit-checkpoint-${suffix}`, signingKey],
      written: [signingKey, writeKeyFile(dir, publicName, pair.publicPem)],
    };
  },
  afterRestart: (next) =>
    `the next checkpoint is signed by ${next[0]}; write one now (POST /api/admin/schedules/audit.checkpoint/run) before bun run audit:verify, which checks the newest checkpoint with the new key`,
  runbook: "docs/audit.md",
};

/** By `--rotate` name. */
export const ROTATED_KEYS: ReadonlyMap<string, RotatedKey> = new Map(
  [tenantSecrets, dataProtection, smsCodePepper, auditCheckpoint].map((k) => [k.name, k]),
);
