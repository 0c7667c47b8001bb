/**
 * The life of an API process, the same under Bun (src/server.ts) and Deno (src/deno.ts): load the
 * configuration, create the dependencies, wait briefly for the cache, build the app, serve it
 * through the runtime's adapter, start the background loops; on SIGTERM/SIGINT drain requests,
 * loops and pending sends against one deadline, close the dependencies and return the exit code.
 */
import { type App, createApp } from "./app.ts";
import { ConfigError } from "./config/config-error.ts";
import { type AppConfig, type LoadOptions, loadConfig } from "./config/load.ts";
import type { HeldLock } from "./db/client.ts";
import { describeDatabaseFailure } from "./db/database-failure.ts";
import { SERVING_LOCK } from "./db/migrator.ts";
import { closeDeps, createDeps, type Deps } from "./deps.ts";
import { API_JOB_KINDS, startApiBackground } from "./loops/api-background.ts";
import type { Background } from "./loops/background.ts";
import { observeOperatorGauges } from "./loops/operator-gauges.ts";
import { laterChecks, SCHEMA_RECHECK_MS, schemaGate } from "./start-up-gates.ts";
import type { Logger } from "./telemetry/logger.ts";

export type StopSignal = "SIGTERM" | "SIGINT";

/** Why a serving process stops without a signal (exit 1). */
type Unserved = "refused" | "background failed";

/** The HTTP server as the runtime started it. */
export interface ServedHttp {
  port: number;
  /** Stops accepting; resolves once the requests in flight are answered. */
  drain(): Promise<void>;
  /** Closes the remaining connections at once (the drain outlasted the deadline); absent: nothing to do. */
  close?(): Promise<void>;
}

/** What differs between runtimes: how to serve, how signals arrive, how the process ends. */
export interface RuntimeAdapter {
  /** Extra fields of the `listening` log line (Deno: `runtime`). */
  listeningFields?: Record<string, unknown>;
  serve(app: App, deps: Deps, port: number): Promise<ServedHttp>;
  onSignal(handler: (signal: StopSignal) => void): void;
  exit(code: number): never;
}

export interface LifecycleOptions {
  config?: LoadOptions;
  /** Runs once the dependencies exist, before serving (Bun's `--migrate`); a non-zero code ends start-up. */
  prepare?: (config: AppConfig, deps: Deps) => Promise<number>;
  /** Runs once the server listens, with its port (the quickstart's block of URLs). */
  listening?: (port: number) => void;
}

/** Serves the API until a signal, then drains; resolves the process's exit code. */
export async function runApi(runtime: RuntimeAdapter, options: LifecycleOptions = {}): Promise<number> {
  // handlers from the start, so no signal falls in a gap between serving and being able to drain;
  // before the server serves there is nothing to drain and a signal ends the process as before
  let serving = false;
  const signalled = new Promise<StopSignal>((resolve) => {
    runtime.onSignal((signal) => {
      if (!serving) runtime.exit(signal === "SIGTERM" ? 143 : 130);
      resolve(signal);
    });
  });

  let config: AppConfig;
  try {
    config = loadConfig(options.config);
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`);
      return 1;
    }
    throw error;
  }

  let deps: Deps;
  try {
    deps = await createDeps(config);
  } catch (error) {
    const failure = describeDatabaseFailure(error);
    const cause = failure.code ? ` [${failure.class}, ${failure.code}]` : "";
    process.stderr.write(`Start-up failed: ${createSafeMessage(config, error)}${cause}\n`);
    return 1;
  }
  const { logger } = deps;
  observeOperatorGauges(deps, API_JOB_KINDS);
  if (config.database.embedded) {
    logger.warn("using embedded PGlite: for development only", {
      database: config.database.source,
      // a new data directory copied from the migrated template (src/db/pglite-template.ts)
      template: deps.database.createdFromTemplate,
    });
  }
  if (options.prepare) {
    const code = await options.prepare(config, deps);
    if (code !== 0) {
      await closeDeps(deps);
      return code;
    }
  }

  const gate = await schemaGate(config, deps);
  if (!gate.serve) {
    await closeDeps(deps);
    return 1;
  }
  // the database was out (or not migrated) at start-up, so what start-up checks against it was not
  // checked (nor the key bindings recorded): it is once the database is current, before the loops
  // start; Production then refuses as it would have at start
  let stopServing: (why: Unserved) => void = () => {};
  const unserved = new Promise<Unserved>((resolve) => {
    stopServing = resolve;
  });
  const checkLater =
    gate.roleChecked && gate.keysRecorded
      ? undefined
      : async () => {
          if (await laterChecks(config, deps, { role: !gate.roleChecked, keys: !gate.keysRecorded }))
            return true;
          stopServing("refused"); // only Production's gates refuse
          return false;
        };

  // connecting never aborts start-up; give the cache a moment so the first requests find it ready
  if (deps.cache && !(await deps.cache.waitReady(2_000)))
    logger.warn("cache not reachable yet; serving anyway, readiness reports it until it is back");

  const app = createApp(deps);
  let server: ServedHttp;
  try {
    server = await runtime.serve(app, deps, config.settings.Server.Port);
  } catch (error) {
    // one log line, not the runtime's stack trace (EADDRINUSE: another process has the port)
    const code = (error as { code?: unknown })?.code;
    const inUse = code === "EADDRINUSE" || (error as Error)?.name === "AddrInUse"; // Bun/Node, Deno
    logger.error(inUse ? "port already in use" : "could not listen", {
      port: config.settings.Server.Port,
      code: typeof code === "string" ? code : undefined,
      error: createSafeMessage(config, error),
    });
    logger.flush();
    await closeDeps(deps);
    return 1;
  }
  serving = true;
  logger.info("listening", {
    port: server.port,
    ...runtime.listeningFields,
    environment: config.environment,
    database: {
      driver: deps.database.driver,
      source: config.database.source,
      poolMode: deps.database.poolMode,
      direct: deps.database.pingDirect !== undefined,
    },
    cache: config.cache ? { source: config.cache.source, cluster: deps.cache?.cluster ?? false } : null,
  });
  logger.flush();
  options.listening?.(server.port);

  // While this process serves it holds the serving lock (shared), so `migrate --down` can tell.
  const servingLock = holdServingLock(deps);

  const background = startBackgroundWhenCurrent(deps, {
    waited: gate.waiting,
    checkLater,
    failed: () => stopServing("background failed"),
  });

  const stop = await Promise.race([signalled, unserved]);
  await shutDown({ config, deps, server, background, servingLock, signal: stop });
  return stop === "SIGTERM" || stop === "SIGINT" ? 0 : 1;
}

/**
 * The background loops, after the server listens and once the schema has every migration this code
 * ships; LISTEN failing only costs wake-ups, the loops keep polling.
 */
function startBackgroundWhenCurrent(
  deps: Deps,
  options: {
    /** The gate made them wait (pending migrations, or no database at start-up): say when they start. */
    waited: boolean;
    /** The checks start-up could not make; false: Production refused (runApi stops the process). */
    checkLater?: () => Promise<boolean>;
    /** The loops could not start: the process stops (exit 1) rather than serve without them. */
    failed: () => void;
  },
): Promise<Background | null> {
  return deps.schema
    .whenCurrent()
    .then(async (current) => {
      if (!current) return null;
      if (options.checkLater && !(await options.checkLater())) return null;
      if (options.waited)
        deps.logger.info(
          "the database has every migration this release ships: starting the background loops",
        );
      return startApiBackground(deps);
    })
    .catch((error: unknown) => {
      deps.logger.error(
        "background loops failed to start: stopping (exit 1) rather than serving without them; a restart starts them",
        { error },
      );
      deps.logger.flush();
      options.failed();
      return null;
    });
}

/**
 * The drain on SIGTERM/SIGINT: requests, background loops and started sends against one deadline,
 * then the serving lock and the dependencies; every step bounded.
 */
async function shutDown(input: {
  config: AppConfig;
  deps: Deps;
  server: ServedHttp;
  background: Promise<Background | null>;
  servingLock: { release(): Promise<void> };
  /** What ended serving: a signal, a check Production refused once the database was back, or the loops. */
  signal: StopSignal | Unserved;
}): Promise<void> {
  const { config, deps, server, background, servingLock, signal } = input;
  const { logger } = deps;
  const timeoutMs = config.settings.Server.ShutdownTimeoutSeconds * 1000;
  // one deadline for the whole drain: requests, background loops and started sends together
  const deadline = Date.now() + timeoutMs;
  logger.info("shutting down", { signal, timeoutMs });
  deps.schema.stop();
  // stop claiming at once; running jobs share the same deadline as in-flight requests, then are released
  const backgroundStopped = background.then((b) => b?.stop(timeoutMs));
  const timedOut = await Promise.race([
    server.drain().then(() => false),
    new Promise<boolean>((r) => setTimeout(() => r(true), timeoutMs)),
  ]);
  if (timedOut) {
    logger.warn("shutdown timeout: closing remaining connections");
    await server.close?.();
  }
  // every later step is bounded too: a statement stuck on a connection the network dropped without a
  // reset must not keep the process from exiting (it is named, then left behind)
  const left = () => Math.max(0, deadline - Date.now()) + SHUTDOWN_GRACE_MS;
  await boundedStep(logger, "background loops", backgroundStopped, left());
  await boundedStep(logger, "serving lock release", servingLock.release(), left());
  // work requests started without waiting (SMS sends) finishes before the database closes
  if (!(await deps.pending.settled(Math.max(0, deadline - Date.now())))) {
    logger.warn("shutdown timeout: background sends still running", { pending: deps.pending.size });
  }
  await closeDeps(deps);
  logger.info("stopped");
  logger.flush();
}

/** After the shutdown deadline, how long a step still gets before it is left behind. */
const SHUTDOWN_GRACE_MS = 2_000;

/** Waits for `step` at most `ms`; if it is still running then, says so (naming it) and goes on. */
async function boundedStep(logger: Logger, what: string, step: Promise<unknown>, ms: number): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const finished = await Promise.race([
    step.then(
      () => true,
      () => true,
    ),
    new Promise<false>((r) => {
      timer = setTimeout(() => r(false), ms);
    }),
  ]);
  clearTimeout(timer);
  if (!finished) logger.warn("shutdown timeout: a step did not finish, leaving it", { step: what });
}

/**
 * Holds the serving lock while the process serves: taken after start-up, checked every few
 * seconds, and taken again on a new connection when the one holding it was lost.
 */
function holdServingLock(deps: Deps): { release(): Promise<void> } {
  const hold = deps.database.holdSharedLock;
  if (!hold) return { release: async () => {} };
  let lock: HeldLock | null = null;
  let stopped = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const round = async () => {
    try {
      if (lock && !(await lock.held(SCHEMA_RECHECK_MS))) {
        await lock.release();
        lock = null;
      }
      lock ??= await hold(SERVING_LOCK);
    } catch {
      lock = null; // the database is down: the schema gate's checks and readiness say so
    }
    if (!stopped)
      timer = setTimeout(() => {
        current = round();
      }, SCHEMA_RECHECK_MS);
  };
  let current = round();
  return {
    async release() {
      stopped = true;
      clearTimeout(timer);
      await current;
      await lock?.release();
    },
  };
}

/** A start-up failure's message with every configured secret value cut out. */
export function createSafeMessage(config: AppConfig, error: unknown): string {
  let message = error instanceof Error ? error.message : String(error);
  for (const secret of config.secretValues)
    if (secret.length >= 4) message = message.split(secret).join("[REDACTED]");
  return message;
}
