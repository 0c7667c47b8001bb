import { parseArgs } from "node:util";
import { PLATFORM_CHAIN } from "./audit/chain.ts";
import { type ChainReport, verifyAuditChains } from "./audit/verify-chains.ts";
import { loadCliContext, withCliDatabase } from "./cli.ts";
import { systemCtx } from "./context.ts";
import type { Database } from "./db/client.ts";

export const EXIT = {
  /** Every chain verified walks unbroken from its start to its head. */
  ok: 0,
  /** Configuration invalid or database unreachable; nothing verified. */
  failure: 1,
  /** A chain is broken: a row was changed, inserted or removed (the first break of each is named). */
  tampered: 2,
  usage: 64,
} as const;

const HELP = `Usage: bun run audit:verify [--tenant ID]

Walks the audit log's hash chains (docs/audit.md): every tenant's and the platform's, or only
--tenant ID (a tenant id, or "platform"). Each row's SHA-256 is recomputed and linked to the row
before it, from where the chain starts (its first row, or where retention pruned it) to its head.

Options:
  --tenant <id>  One chain only.
  --help         Show this help.

Exit codes: 0 every chain verified is intact; 1 configuration or database failure; 2 a chain is
broken: the first row changed, inserted or removed is named on stderr, per chain; 64 bad usage.
`;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Verifies the chains and prints one line per chain; returns an exit code. */
export async function runAuditVerify(
  database: Database,
  input: { tenantId?: string },
  out: { write(line: string): void; error(line: string): void },
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
  return broken > 0 ? EXIT.tampered : EXIT.ok;
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
    if (tenantId !== undefined && tenantId !== PLATFORM_CHAIN && !UUID.test(tenantId))
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
      runAuditVerify(database, tenantId === undefined ? {} : { tenantId: tenantId.toLowerCase() }, {
        write: (line) => process.stdout.write(line),
        error: (line) => process.stderr.write(line),
      }),
  );
}

if (import.meta.main) {
  process.exit(await main(process.argv.slice(2)));
}
