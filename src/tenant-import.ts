import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { loadCliContext, withCliDatabase } from "./cli.ts";
import type { AppConfig } from "./config/load.ts";
import { systemCtx } from "./context.ts";
import type { Database } from "./db/client.ts";
import { parseTenantSecretKeys } from "./security/tenant-secrets.ts";
import { createObjectStorage } from "./storage/object-storage.ts";
import type { Logger } from "./telemetry/logger.ts";
import { ArchiveRefusedError, importTenantArchive } from "./tenant-lifecycle/import-archive.ts";

export const EXIT = { ok: 0, failure: 1, refused: 2, usage: 64 } as const;

const HELP = `Usage: bun run tenant:import ARCHIVE [--as CODE] [--passphrase-file PATH]

Loads a tenant export (the .tar.gz that GET .../exports/{exportId} links to) into this
installation's database and object storage, in one transaction: every file is checked against the
manifest's SHA-256 and the manifest's schema version against this database's last migration first.
The tenant keeps its id; its code is the archive's unless --as gives another. Queued jobs of the
source installation are not loaded. Provider secrets in the archive are opened with the export's
passphrase and sealed again under this installation's Security:TenantSecrets keys.

Options:
  --as CODE               The restored tenant's code.
  --passphrase-file PATH  A file holding the passphrase the secrets were sealed to (first line).
  --help                  Show this help.

Exit codes: 0 loaded; 1 configuration, database or storage failure (nothing loaded); 2 archive
refused (manifest, hashes, schema version, a tenant id or code already here), nothing changed;
64 bad usage.
`;

export async function runTenantImport(
  config: AppConfig,
  database: Database,
  input: { path: string; as?: string | undefined; passphrase?: string | undefined },
  logger: Logger,
): Promise<number> {
  const keyring = parseTenantSecretKeys(config.settings.Security.TenantSecrets).keyring ?? null;
  const deps = {
    database,
    storage: createObjectStorage(config, { clock: { now: () => new Date() } }),
    tenantSecretKeyring: keyring,
    clock: { now: () => new Date() },
  };
  try {
    const result = await importTenantArchive(deps, systemCtx("tenant:import"), input);
    logger.info("tenant imported", { tenantId: result.tenantId, code: result.code, counts: result.counts });
    return EXIT.ok;
  } catch (error) {
    if (error instanceof ArchiveRefusedError) {
      logger.error(`archive refused, nothing changed: ${error.message}`);
      return EXIT.refused;
    }
    throw error;
  }
}

export async function main(argv: string[]): Promise<number> {
  let input: { path: string; as?: string | undefined; passphrase?: string | undefined };
  try {
    const { values, positionals } = parseArgs({
      args: argv,
      allowPositionals: true,
      options: { as: { type: "string" }, "passphrase-file": { type: "string" }, help: { type: "boolean" } },
    });
    if (values.help) {
      process.stdout.write(HELP);
      return EXIT.ok;
    }
    const [path, ...rest] = positionals;
    if (!path || rest.length > 0) throw new Error("give exactly one ARCHIVE");
    const file = values["passphrase-file"];
    input = {
      path,
      as: values.as,
      passphrase: file === undefined ? undefined : (readFileSync(file, "utf8").split(/\r?\n/)[0] ?? ""),
    };
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n\n${HELP}`);
    return EXIT.usage;
  }
  const context = loadCliContext("tenant-import", { process: "migrator" });
  if (!context) return EXIT.failure;
  const { config, logger } = context;
  return withCliDatabase(
    context,
    { name: "tenant-import", failed: "tenant import failed", failureCode: EXIT.failure },
    (database) => runTenantImport(config, database, input, logger),
  );
}

if (import.meta.main) {
  process.exit(await main(process.argv.slice(2)));
}
