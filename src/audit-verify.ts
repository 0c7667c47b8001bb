import type { KeyObject } from "node:crypto";
import { parseArgs } from "node:util";
import { PLATFORM_CHAIN } from "./audit/chain.ts";
import { checkpointVerifyKey, openCheckpoint } from "./audit/checkpoint.ts";
import { type ChainReport, verifyAuditChains } from "./audit/verify-chains.ts";
import { compareWithCheckpoint } from "./audit/verify-checkpoint.ts";
import { loadCliContext, withCliDatabase } from "./cli.ts";
import { systemClock } from "./clock.ts";
import type { AppConfig } from "./config/load.ts";
import { systemCtx } from "./context.ts";
import type { Database } from "./db/client.ts";
import { withPlatformSnapshot } from "./db/operation.ts";
import { type CheckpointStore, checkpointStoreOf } from "./storage/audit-checkpoints.ts";
import { isUuid } from "./uuid.ts";

type CliConfig = Pick<AppConfig, "settings">;

export const EXIT = {
  /** Every chain verified walks unbroken from its start to its head. */
  ok: 0,
  /** Configuration invalid or database unreachable; nothing verified. */
  failure: 1,
  /**
   * A chain is broken: a row was changed, inserted or removed (the first break of each is named);
   * or it no longer holds what the latest checkpoint signed (trimmed, deleted, a tenant deleted), or
   * that checkpoint's signature does not verify.
   */
  tampered: 2,
  usage: 64,
} as const;

const HELP = `Usage: bun run audit:verify [--tenant ID]

Walks the audit log's hash chains (docs/audit.md): every tenant's and the platform's, or only
--tenant ID (a tenant id, or "platform"). Each row's SHA-256 is recomputed and linked to the row
before it, from where the chain starts (its first row, or where retention pruned it) to its head.
With Audit:Checkpoints configured (a key and a bucket), the chains are also held to the latest
signed checkpoint in object storage: a chain whose signed head is gone was trimmed or deleted
(with its tenant, when that is gone too), and each is named.

Options:
  --tenant <id>  One chain only.
  --help         Show this help.

Exit codes: 0 every chain verified is intact; 1 configuration or database failure; 2 a chain is
broken: the first row changed, inserted or removed is named on stderr, per chain; 64 bad usage.
`;

/** What holds the chains to a checkpoint: where checkpoints are, the key that verifies them. */
export interface CheckpointCheck {
  store: CheckpointStore;
  key: KeyObject;
  now: Date;
  retentionDays: number;
}

/** Verifies the chains and prints one line per chain; returns an exit code. */
export async function runAuditVerify(
  database: Database,
  input: { tenantId?: string },
  out: { write(line: string): void; error(line: string): void },
  checkpoints?: CheckpointCheck,
): Promise<number> {
  const reports: ChainReport[] = await verifyAuditChains({ database }, systemCtx("audit:verify"), input);
  let broken = 0;
  for (const report of reports) {
    if (report.broken) {
      broken++;
      out.error(`audit chain ${report.chain}: BROKEN (${report.broken.kind}): ${report.broken.message}\n`);
    } else out.write(`audit chain ${report.chain}: ok, ${report.rows} rows\n`);
  }
  if (reports.length === 0) out.write("no audit chains yet\n");
  if (checkpoints) broken += await checkAgainstCheckpoint(database, input, out, checkpoints);
  return broken > 0 ? EXIT.tampered : EXIT.ok;
}

/** The chains against the latest checkpoint: how many breaks it found (printed). */
async function checkAgainstCheckpoint(
  database: Database,
  input: { tenantId?: string },
  out: { write(line: string): void; error(line: string): void },
  check: CheckpointCheck,
): Promise<number> {
  const latest = await check.store.latest();
  if (!latest) {
    out.write("no audit checkpoint yet: the chains are not anchored\n");
    return 0;
  }
  const opened = openCheckpoint(latest.body, check.key);
  if ("error" in opened) {
    out.error(`audit checkpoint ${latest.key}: BROKEN: ${opened.error}\n`);
    return 1;
  }
  const { checkpoint } = opened;
  const only = input.tenantId;
  const scoped = {
    ...checkpoint,
    chains: checkpoint.chains.filter((c) => only === undefined || c.chain === only),
  };
  const breaks = await withPlatformSnapshot({ database }, systemCtx("audit:verify"), (tx) =>
    compareWithCheckpoint(tx, scoped, { now: check.now, retentionDays: check.retentionDays }),
  );
  for (const b of breaks) out.error(`audit chain ${b.chain}: BROKEN (${b.kind}): ${b.message}\n`);
  if (breaks.length === 0)
    out.write(`audit checkpoint ${checkpoint.at}: ${scoped.chains.length} chain heads still in place\n`);
  return breaks.length;
}

/** The checkpoint check of a configuration, or undefined when checkpoints are off. */
export function checkpointCheckOf(config: CliConfig, now: Date): CheckpointCheck | undefined {
  const key = checkpointVerifyKey(config.settings.Audit.Checkpoints);
  const store = checkpointStoreOf(config.settings);
  if (!key || !store) return undefined;
  return { store, key, now, retentionDays: config.settings.Audit.RetentionDays };
}

async function main(argv: string[]): Promise<number> {
  let tenantId: string | undefined;
  try {
    const { values } = parseArgs({
      args: argv,
      options: { tenant: { type: "string" }, help: { type: "boolean", short: "h", default: false } },
      strict: true,
    });
    if (values.help) {
      process.stdout.write(HELP);
      return EXIT.ok;
    }
    tenantId = values.tenant;
    if (tenantId !== undefined && tenantId !== PLATFORM_CHAIN && !isUuid(tenantId))
      throw new Error("--tenant must be a tenant id (a UUID) or platform");
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n\n${HELP}`);
    return EXIT.usage;
  }
  const context = loadCliContext("audit-verify", { process: "migrator" });
  if (!context) return EXIT.failure;
  return withCliDatabase(
    context,
    { name: "audit-verify", failed: "audit verification failed", failureCode: EXIT.failure },
    (database) =>
      runAuditVerify(
        database,
        tenantId === undefined ? {} : { tenantId: tenantId.toLowerCase() },
        { write: (line) => process.stdout.write(line), error: (line) => process.stderr.write(line) },
        checkpointCheckOf(context.config, systemClock.now()),
      ),
  );
}

if (import.meta.main) {
  process.exit(await main(process.argv.slice(2)));
}
