/**
 * What an API process checks against its database before it serves and before its loops start
 * (src/lifecycle.ts): the schema gate and the role row-level security must hold; when the database
 * was out (or not migrated) at start-up, the role and the key bindings (createDeps checks them when it
 * answers) once it is current. Production refuses (false); elsewhere each is a warning. Only once the
 * gates pass are the key ids not seen before recorded: a refused start writes nothing.
 */
import type { AppConfig } from "./config/load.ts";
import { roleNotHeldByRowSecurity } from "./db/app-role.ts";
import { createOutageLog } from "./db/outage-log.ts";
import { pendingSentence } from "./db/schema-gate.ts";
import type { Deps } from "./deps.ts";
import { checkKeyBindings, recordKeyBindings } from "./security/key-fingerprints.ts";

/** How often a process waiting for migrations (or for its database) checks the schema again. */
export const SCHEMA_RECHECK_MS = 5_000;

const warnedUnknown = new WeakSet<Deps>();

/** Once per process: the database has migrations this code does not ship (a newer release ran). */
function warnUnknown(deps: Deps): void {
  const unknown = deps.schema.last?.unknown ?? [];
  if (unknown.length === 0 || warnedUnknown.has(deps)) return;
  warnedUnknown.add(deps);
  deps.logger.warn(
    "the database has migrations this release does not ship (a newer release migrated it, as in a rolling upgrade); serving beside them",
    { unknown },
  );
}

/**
 * The API's role must be one row-level security holds (`Database:AppRole`): as a superuser, a
 * BYPASSRLS role or an owner of the tables one missed tenant filter is a cross-tenant read, or the
 * policies can be dropped. Production refuses to start (false); Development and Staging warn once and
 * serve. The embedded PGlite database (`npm run dev`) has one role, a superuser, and no other to use:
 * it is not checked (start-up already warns that PGlite is for development only).
 */
async function roleGate(config: AppConfig, deps: Deps): Promise<boolean> {
  if (config.database.embedded) return true;
  const unheld = await roleNotHeldByRowSecurity(deps.database.db);
  if (!unheld) return true;
  const appRole = config.settings.Database.AppRole;
  const sentence = `the API connects as role ${unheld.role}, ${unheld.reason}; connect as Database:AppRole (${appRole}), which \`bun run migrate\` creates and grants (docs/deployment.md, "The database roles")`;
  const fields = { role: unheld.role, reason: unheld.reason, appRole };
  if (config.environment === "Production") {
    deps.logger.error(sentence, fields);
    deps.logger.flush();
    return false;
  }
  deps.logger.warn(`${sentence}; serving anyway (${config.environment})`, {
    ...fields,
    environment: config.environment,
  });
  return true;
}

/**
 * The schema gate at start-up (src/db/schema-gate.ts). Pending migrations: Production refuses to
 * start (false); elsewhere the process serves, readiness fails with `database:migrations` and the
 * loops wait while the gate checks again every few seconds. A database that cannot be reached is
 * named by its cause and checked again the same way.
 */
export async function schemaGate(
  config: AppConfig,
  deps: Deps,
): Promise<{ serve: boolean; roleChecked: boolean; keysRecorded: boolean; waiting: boolean }> {
  const { logger } = deps;
  const outage = createOutageLog({ logger, what: "database check" });
  let waiting = false;
  let roleChecked = false;
  let keysRecorded = false;
  try {
    const state = await deps.schema.check();
    warnUnknown(deps);
    if (!(await roleGate(config, deps))) return { serve: false, roleChecked: true, keysRecorded, waiting };
    roleChecked = true;
    if (state.pending.length > 0) {
      if (config.environment === "Production") {
        logger.error(pendingSentence(state.pending), {
          pending: state.pending,
          environment: config.environment,
        });
        logger.flush();
        return { serve: false, roleChecked, keysRecorded, waiting };
      }
      waiting = true;
      logger.warn(
        `${pendingSentence(state.pending)}; serving, but not ready until then, and the loops wait`,
        {
          pending: state.pending,
          environment: config.environment,
        },
      );
    } else if (deps.keyBindings) {
      // the gates passed: now the key ids start-up read as unrecorded are recorded (not checked:
      // laterChecks records them once the database answers)
      const recorded = await recordKeys(config, deps, deps.keyBindings.unrecorded);
      if (recorded === false) return { serve: false, roleChecked, keysRecorded, waiting };
      keysRecorded = recorded === true;
    }
  } catch (error) {
    // "database check failed" with the cause's class and code (database missing, 3D000, …)
    outage.failed(error);
    waiting = true;
    logger.warn("serving anyway: readiness reports the database, and the loops wait, until it is back");
  }
  deps.schema.watch(SCHEMA_RECHECK_MS, (error) => outage.failed(error));
  // the loops' own line follows the checks still to make (startBackgroundWhenCurrent), which may refuse
  void deps.schema.whenCurrent().then((current) => {
    if (!current) return;
    outage.succeeded();
    warnUnknown(deps);
  });
  return { serve: true, roleChecked, keysRecorded, waiting };
}

/**
 * What start-up could not check (or record) while the database was out (or not migrated), once it is
 * current: the role (when `role`), then the key bindings (when `keys`: checked unless start-up could,
 * then recorded). False: Production refuses. A check the database does not answer (it went again)
 * warns and lets the loops start, as they did before these checks were deferred, rather than never.
 */
export async function laterChecks(
  config: AppConfig,
  deps: Deps,
  pending: { role: boolean; keys: boolean },
): Promise<boolean> {
  let roleHeld = true;
  if (pending.role) {
    try {
      if (!(await roleGate(config, deps))) return false;
    } catch (error) {
      roleHeld = false;
      deps.logger.warn("the API's database role could not be checked", {
        error: messageOf(error),
      });
    }
  }
  if (!pending.keys) return true;
  let unrecorded = deps.keyBindings?.unrecorded;
  if (!unrecorded) {
    const bindings = await checkKeyBindings(deps.database.db, deps.tenantSecretKeyring, deps.dataProtection);
    if (!bindings.checked) {
      deps.logger.warn("key bindings could not be checked", {
        error: bindings.error === undefined ? undefined : messageOf(bindings.error),
      });
      return true;
    }
    if (!keyProblems(config, deps, bindings.problems)) return false;
    unrecorded = bindings.unrecorded;
  }
  // nothing is recorded by a start whose role was not checked
  if (!roleHeld) return true;
  const recorded = await recordKeys(config, deps, unrecorded);
  if (recorded === "unchecked")
    deps.logger.warn(
      "key bindings could not be recorded: the database did not answer; the next start records them",
    );
  return recorded !== false;
}

/**
 * Records the key ids not recorded yet, once the gates passed. False: Production refuses a different
 * key that another process recorded under one of them meanwhile; "unchecked": the database did not
 * answer (nothing recorded).
 */
async function recordKeys(
  config: AppConfig,
  deps: Deps,
  unrecorded: string[],
): Promise<boolean | "unchecked"> {
  const bindings = await recordKeyBindings(deps.database.db, deps.tenantSecretKeyring, unrecorded);
  if (!bindings.checked) return "unchecked";
  return keyProblems(config, deps, bindings.problems);
}

/** The key bindings' problems: Production refuses (false, each an error line); elsewhere each warns. */
function keyProblems(config: AppConfig, deps: Deps, problems: string[]): boolean {
  if (problems.length === 0) return true;
  if (config.environment === "Production") {
    for (const problem of problems) deps.logger.error(problem, { environment: config.environment });
    deps.logger.flush();
    return false;
  }
  for (const problem of problems) deps.logger.warn(problem, { environment: config.environment });
  return true;
}

/** A failed check's message; the logger redacts every configured secret from it. */
function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
