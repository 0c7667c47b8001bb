import { describeDatabaseFailure, failureSummary } from "../db/database-failure.ts";
import { MigrationsPendingError } from "../db/schema-gate.ts";
import type { Deps } from "../deps.ts";
import { withTimeout } from "../runtime/with-timeout.ts";
import type { Probe } from "./readiness.ts";

/**
 * What readiness checks: the database answers and has every migration this code ships, the direct
 * connection beside a transaction pooler answers (when there is one), and the configured cache.
 */
export function readinessProbes(deps: Pick<Deps, "database" | "schema" | "cache">): Probe[] {
  const explainDatabase = (error: unknown) => failureSummary(describeDatabaseFailure(error));
  const probes: Probe[] = [
    {
      name: "database:responseTime",
      componentType: "datastore",
      run: (ms) => deps.database.ping(ms),
      explain: explainDatabase,
    },
    {
      // the schema gate: fails while a migration this code ships is not applied (src/db/schema-gate.ts)
      name: "database:migrations",
      componentType: "datastore",
      run: async (ms) => {
        const state = await withTimeout(deps.schema.check(), ms, "migrations check");
        if (state.pending.length > 0) throw new MigrationsPendingError(state.pending);
      },
      explain: (error) => (error instanceof MigrationsPendingError ? error.message : explainDatabase(error)),
    },
  ];
  const pingDirect = deps.database.pingDirect;
  if (pingDirect)
    probes.push({
      // the direct (session) connection beside a transaction pooler: LISTEN and the serving lock
      name: "database-direct:responseTime",
      componentType: "datastore",
      run: (ms) => pingDirect(ms),
      explain: explainDatabase,
    });
  const cache = deps.cache;
  if (cache)
    probes.push({ name: "cache:responseTime", componentType: "datastore", run: (ms) => cache.ping(ms) });
  return probes;
}
