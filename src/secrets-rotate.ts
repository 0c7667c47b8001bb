import { parseArgs } from "node:util";
import { ConfigError } from "./config/errors.ts";
import { type AppConfig, loadConfig } from "./config/load.ts";
import { createRedactor } from "./config/redact.ts";
import { type Database, openDatabase } from "./db/client.ts";
import { rotateTenantSecrets } from "./providers/secrets.ts";
import { parseTenantSecretKeys } from "./security/tenant-secrets.ts";
import { createLogger, type Logger } from "./telemetry/logger.ts";

export const EXIT = {
  /** Every tenant secret is under the current key (nothing to do, or all re-encrypted). */
  ok: 0,
  /** Configuration invalid or database unreachable; nothing or part was re-encrypted (rerun). */
  failure: 1,
  /** Some secrets open with no configured key; they were left as they were, the rest rotated. */
  undecryptable: 2,
  usage: 64,
} as const;

const HELP = `Usage: bun run secrets:rotate [options]

Re-encrypts every tenant secret that is not under the current master key
(Security:TenantSecrets:KeyId / MasterKey, PLINTH_TENANT_SECRET_KEY_ID / _MASTER_KEY). The old
key must still be configured as Security:TenantSecrets:PreviousKeys:N:KeyId / MasterKey so the
old values decrypt. Runs in batches, one transaction each; safe to rerun and to run twice at once.

Options:
  --batch-size <n>  Secrets per transaction (default 100).
  --help            Show this help.

Exit codes: 0 every secret is under the current key; 1 configuration or database failure (rerun);
2 some secrets decrypt with no configured key (listed by tenant, name and key id; left unchanged);
64 bad usage.
`;

export interface RotateFlags {
  batchSize: number;
}

/** Rotates tenant secrets as configured; returns an exit code. Values are never logged. */
export async function runSecretsRotate(
  config: AppConfig,
  database: Database,
  flags: RotateFlags,
  logger: Logger,
  now: () => Date = () => new Date(),
): Promise<number> {
  const { keyring, problems } = parseTenantSecretKeys(config.settings.Security.TenantSecrets);
  if (!keyring) {
    logger.error("tenant secret keys are not usable; nothing rotated", { problems });
    return EXIT.failure;
  }
  const result = await rotateTenantSecrets(database.db, keyring, {
    batchSize: flags.batchSize,
    now,
    onBatch: (rotated) => logger.info("batch re-encrypted", { rotated }),
  });
  for (const failed of result.failed) logger.error("tenant secret does not decrypt; left unchanged", failed);
  logger.info("tenant secret rotation finished", {
    currentKeyId: keyring.current.keyId,
    rotated: result.rotated,
    undecryptable: result.failed.length,
    remaining: result.remaining,
  });
  return result.failed.length > 0 ? EXIT.undecryptable : EXIT.ok;
}

async function main(argv: string[]): Promise<number> {
  let flags: RotateFlags;
  try {
    const { values } = parseArgs({
      args: argv,
      options: {
        "batch-size": { type: "string", default: "100" },
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
    flags = { batchSize };
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n\n${HELP}`);
    return EXIT.usage;
  }

  let config: AppConfig;
  try {
    config = loadConfig({ process: "migrator" });
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`);
      return EXIT.failure;
    }
    throw error;
  }
  const redactor = createRedactor(config.secretValues);
  const logger = createLogger(
    { level: config.settings.Logging.Level, redactor },
    { process: "secrets-rotate" },
  );
  let database: Database | undefined;
  try {
    database = await openDatabase(config.database.url, {
      poolSize: 2,
      applicationName: "plinth-secrets-rotate",
    });
    return await runSecretsRotate(config, database, flags, logger);
  } catch (error) {
    logger.error("secret rotation failed", {
      error: redactor.text(String((error as Error).message ?? error)),
    });
    return EXIT.failure;
  } finally {
    await database?.close();
  }
}

if (import.meta.main) {
  process.exit(await main(process.argv.slice(2)));
}
