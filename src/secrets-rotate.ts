import { parseArgs } from "node:util";
import { rotateTotpSecrets } from "./auth/totp-rotation.ts";
import { loadCliContext, withCliDatabase } from "./cli.ts";
import { type AppConfig, sourceNote } from "./config/load.ts";
import { systemCtx } from "./context.ts";
import type { Database } from "./db/client.ts";
import { rotateTenantSecrets } from "./providers/tenant-secret-store.ts";
import { rewrapTenantDataKeys } from "./security/data-key-rotation.ts";
import { createDataProtection } from "./security/data-protection.ts";
import {
  DATA_PROTECTION_MISMATCH,
  recordTenantKeyFingerprints,
  TENANT_KEY_MISMATCH,
  unusableDataProtectionKeys,
} from "./security/key-fingerprints.ts";
import { parseTenantSecretKeys } from "./security/tenant-secrets.ts";
import type { Logger } from "./telemetry/logger.ts";

export const EXIT = {
  /** Every tenant secret is under the current key (nothing to do, or all re-encrypted). */
  ok: 0,
  /** Configuration invalid or database unreachable; nothing or part was re-encrypted (rerun). */
  failure: 1,
  /** Some secrets open with no configured key; they were left as they were, the rest rotated. */
  undecryptable: 2,
  /**
   * Every secret that was tried decrypted, but some are still not under the current key (locked by
   * another run, or written under an old key meanwhile by a process on the old configuration). Rerun.
   */
  incomplete: 3,
  /** --revoke-data-protection-key named no live key; nothing changed. */
  noSuchKey: 4,
  /**
   * A configured key is not the one its data was protected with (a different master key under a
   * known key id, or ring keys no configured certificate unwraps); nothing changed.
   */
  keyMismatch: 5,
  usage: 64,
} as const;

const HELP = `Usage: bun run secrets:rotate [options]

Wraps every tenant's data key again under the current master key (Security:TenantSecrets:KeyId /
MasterKey, PLINTH_TENANT_SECRET_KEY_ID / _MASTER_KEY): one small row per tenant, the secrets sealed
under the data keys stay as they are. Values still sealed directly under a master key (written
before tenant data keys, or TOTP secrets of users of no tenant) are re-sealed: a tenant's under its
data key, the others under the current master key. The old key must still be configured as
Security:TenantSecrets:PreviousKeys:N:KeyId / MasterKey so the old values unwrap. Runs in batches,
one transaction each; safe to rerun and to run twice at once.

Data protection (Security:DataProtection) rotates its ring keys by itself every KeyLifetimeDays;
these options act on the ring instead of tenant secrets:
  --data-protection                   Wrap every ring key a PreviousCertificates entry wrapped with
                                      the current certificate (after a certificate change; exit 0:
                                      the previous certificate may go), then create a new ring key
                                      now (early rotation); old keys keep unprotecting. Other
                                      processes use it within 5 minutes.
  --revoke-data-protection-key <id>   Revoke one ring key (after a compromise): payloads under it
                                      (cookies, ...) stop opening.
  --list-data-protection-keys         List ring keys (ids, dates, whether this configuration
                                      can unwrap them).

Options:
  --batch-size <n>  Secrets per transaction (default 100).
  --help            Show this help.

Exit codes: 0 done (every secret is under the current key; only now may the old key be retired);
1 configuration or database failure (rerun); 2 some secrets decrypt with no configured key (listed
by tenant, name and key id; left unchanged); 3 incomplete: some secrets are still not under the
current key (locked by another run, or written under an old key meanwhile) or, with
--data-protection, some ring keys are still wrapped by another certificate, rerun until 0; 4 no
such data-protection key; 5 a configured key is not the one the data was protected with (a
different master key under a key id already in use, or ring keys no configured certificate
unwraps; named by key id), nothing changed: never retire a key on this; 64 bad usage.
`;

export interface RotateFlags {
  batchSize: number;
  dataProtection?: "rotate" | "list" | { revoke: string };
}

/** Rotates tenant secrets as configured; returns an exit code. Values are never logged. */
export async function runSecretsRotate(
  config: AppConfig,
  database: Database,
  flags: RotateFlags,
  logger: Logger,
  now: () => Date = () => new Date(),
): Promise<number> {
  if (flags.dataProtection) return runDataProtection(config, database, flags.dataProtection, logger, now);
  const { keyring, problems } = parseTenantSecretKeys(config.settings.Security.TenantSecrets);
  if (!keyring) {
    logger.error("tenant secret keys are not usable; nothing rotated", {
      problems: problems.map((p) => ({ ...p, problem: `${p.problem}${sourceNote(config, p.key)}` })),
    });
    return EXIT.failure;
  }
  const mismatched = await recordTenantKeyFingerprints(database.db, keyring);
  if (mismatched.length > 0) {
    logger.error(`tenant secret key mismatch; nothing rotated: ${TENANT_KEY_MISMATCH}`, {
      keyIds: mismatched,
    });
    return EXIT.keyMismatch;
  }
  const deps = { database, clock: { now }, tenantSecretKeyring: keyring };
  const keys = await rewrapTenantDataKeys(deps, systemCtx("secrets:rotate"), { batchSize: flags.batchSize });
  for (const failed of keys.failed) logger.error("tenant data key does not unwrap; left unchanged", failed);
  const result = await rotateTenantSecrets(deps, systemCtx("secrets:rotate"), {
    batchSize: flags.batchSize,
    onBatch: (rotated) => logger.info("batch re-encrypted", { rotated }),
  });
  for (const failed of result.failed) logger.error("tenant secret does not decrypt; left unchanged", failed);
  // TOTP authenticators are sealed under the same keys (bound to their user): re-sealed too
  const totp = await rotateTotpSecrets(deps, systemCtx("secrets:rotate"), { batchSize: flags.batchSize });
  for (const failed of totp.failed) logger.error("TOTP secret does not decrypt; left unchanged", failed);
  logger.info("tenant secret rotation finished", {
    currentKeyId: keyring.current.keyId,
    dataKeysRewrapped: keys.rewrapped,
    rotated: result.rotated,
    totpRotated: totp.rotated,
    undecryptable: keys.failed.length + result.failed.length + totp.failed.length,
    remaining: keys.remaining + result.remaining + totp.remaining,
  });
  if (keys.failed.length + result.failed.length + totp.failed.length > 0) return EXIT.undecryptable;
  if (keys.remaining + result.remaining + totp.remaining > 0) {
    logger.warn(
      "some tenant secrets are still not under the current key; rerun before retiring the old key",
      {
        remaining: keys.remaining + result.remaining + totp.remaining,
      },
    );
    return EXIT.incomplete;
  }
  return EXIT.ok;
}

async function runDataProtection(
  config: AppConfig,
  database: Database,
  action: NonNullable<RotateFlags["dataProtection"]>,
  logger: Logger,
  now: () => Date,
): Promise<number> {
  const dp = createDataProtection(config, { db: database.db, clock: { now }, logger });
  if (action === "rotate") {
    const unusable = dp.protectedAtRest ? await unusableDataProtectionKeys(dp) : [];
    if (unusable.length > 0) {
      logger.error(`data protection key mismatch; no key created: ${DATA_PROTECTION_MISMATCH}`, {
        keyIds: unusable,
      });
      return EXIT.keyMismatch;
    }
    const { rewrapped, remaining } = await dp.rewrapKeys();
    if (rewrapped > 0)
      logger.info("data protection keys wrapped with the current certificate", { rewrapped });
    logger.info("data protection key created and active", { keyId: await dp.rotateNow() });
    if (remaining === 0) return EXIT.ok;
    logger.warn(
      "some data protection keys are still wrapped by another certificate (made meanwhile by a process on the old configuration?): restart every process with the new certificate, then rerun before removing PreviousCertificates",
      { remaining },
    );
    return EXIT.incomplete;
  }
  if (action === "list") {
    const keys = await dp.listKeys();
    if (keys.length === 0)
      process.stdout.write(
        "The data protection key ring is empty: no key yet (the API creates one when it first protects something; `--data-protection` creates one now).\n",
      );
    for (const key of keys)
      process.stdout.write(
        `${key.id}  ${key.protection.padEnd(15)} active ${key.activatesAt.toISOString()}  until ${key.expiresAt.toISOString()}  ${key.usable ? "usable" : "NOT USABLE with this configuration"}\n`,
      );
    return EXIT.ok;
  }
  if (!(await dp.revokeKey(action.revoke))) {
    logger.error("no live data protection key has this id; nothing changed", { keyId: action.revoke });
    return EXIT.noSuchKey;
  }
  logger.info("data protection key revoked", { keyId: action.revoke });
  return EXIT.ok;
}

async function main(argv: string[]): Promise<number> {
  let flags: RotateFlags;
  try {
    const { values } = parseArgs({
      args: argv,
      options: {
        "batch-size": { type: "string", default: "100" },
        "data-protection": { type: "boolean", default: false },
        "list-data-protection-keys": { type: "boolean", default: false },
        "revoke-data-protection-key": { type: "string" },
        help: { type: "boolean", short: "h", default: false },
      },
      strict: true,
    });
    if (values.help) {
      process.stdout.write(HELP);
      return EXIT.ok;
    }
    const batchSize = Number(values["batch-size"]);
    if (!Number.isInteger(batchSize) || batchSize < 1 || batchSize > 10_000)
      throw new Error("--batch-size must be an integer from 1 to 10000");
    const revoke = values["revoke-data-protection-key"];
    const actions = [values["data-protection"], values["list-data-protection-keys"], revoke !== undefined];
    if (actions.filter(Boolean).length > 1)
      throw new Error(
        "--data-protection, --list-data-protection-keys and --revoke-data-protection-key exclude each other",
      );
    flags = {
      batchSize,
      dataProtection: values["data-protection"]
        ? "rotate"
        : values["list-data-protection-keys"]
          ? "list"
          : revoke !== undefined
            ? { revoke }
            : undefined,
    };
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n\n${HELP}`);
    return EXIT.usage;
  }

  const context = loadCliContext("secrets-rotate", { process: "migrator" });
  if (!context) return EXIT.failure;
  const { config, logger } = context;
  return withCliDatabase(
    context,
    { name: "secrets-rotate", failed: "secret rotation failed", failureCode: EXIT.failure },
    (database) => runSecretsRotate(config, database, flags, logger),
  );
}

if (import.meta.main) {
  process.exit(await main(process.argv.slice(2)));
}
