/**
 * The life of an API process, the same under Bun (src/server.ts) and Deno (src/deno.ts): load the
 * configuration, create the dependencies, wait briefly for the cache, build the app, serve it
 * through the runtime's adapter, start the background loops; on SIGTERM/SIGINT drain requests,
 * loops and pending sends against one deadline, close the dependencies and return the exit code.
 */
import { type App, createApp } from "./app.ts";
import { ConfigError } from "./config/errors.ts";
import { type AppConfig, type LoadOptions, loadConfig } from "./config/load.ts";
import { closeDeps, createDeps, type Deps } from "./deps.ts";
import { startApiBackground } from "./loops/api-background.ts";

export type StopSignal = "SIGTERM" | "SIGINT";

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
    process.stderr.write(`Start-up failed: ${createSafeMessage(config, error)}\n`);
    return 1;
  }
  const { logger } = deps;
  if (config.database.embedded) {
    logger.warn("using embedded PGlite: for development only", { database: config.database.source });
  }
  if (options.prepare) {
    const code = await options.prepare(config, deps);
    if (code !== 0) {
      await closeDeps(deps);
      return code;
    }
  }

  // connecting never aborts start-up; give the cache a moment so the first requests find it ready
  if (deps.cache && !(await deps.cache.waitReady(2_000)))
    logger.warn("cache not reachable yet; serving anyway, readiness reports it until it is back");

  const app = createApp(deps);
  serving = true;
  const server = await runtime.serve(app, deps, config.settings.Server.Port);
  logger.info("listening", {
    port: server.port,
    ...runtime.listeningFields,
    environment: config.environment,
    database: { driver: deps.database.driver, source: config.database.source },
    cache: config.cache ? { source: config.cache.source } : null,
  });

  // after the server listens; LISTEN failing only costs wake-ups, the loops keep polling
  const background = startApiBackground(deps).catch((error: unknown) => {
    logger.error("background loops failed to start", { error });
    return null;
  });

  const signal = await signalled;
  const timeoutMs = config.settings.Server.ShutdownTimeoutSeconds * 1000;
  // one deadline for the whole drain: requests, background loops and started sends together
  const deadline = Date.now() + timeoutMs;
  logger.info("shutting down", { signal, timeoutMs });
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
  await backgroundStopped;
  // work requests started without waiting (SMS sends) finishes before the database closes
  if (!(await deps.pending.settled(Math.max(0, deadline - Date.now())))) {
    logger.warn("shutdown timeout: background sends still running", { pending: deps.pending.size });
  }
  await closeDeps(deps);
  logger.info("stopped");
  logger.flush();
  return 0;
}

/** A start-up failure's message with every configured secret value cut out. */
export function createSafeMessage(config: AppConfig, error: unknown): string {
  let message = error instanceof Error ? error.message : String(error);
  for (const secret of config.secretValues)
    if (secret.length >= 4) message = message.split(secret).join("[REDACTED]");
  return message;
}
