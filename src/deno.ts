/**
 * The API process under Deno: `deno run -A src/deno.ts` (Deno 2 from the npm registry; the packages
 * come from node_modules, installed by `bun install`). The same `createApp(deps)` and background
 * loops as src/server.ts; what differs is the server (`Deno.serve`) and the signal handling.
 * Migrations are run by the Bun migrator (`bun run migrate`) beforehand.
 */
import { createApp } from "./app.ts";
import { ConfigError } from "./config/errors.ts";
import { loadConfig } from "./config/load.ts";
import { closeDeps, createDeps } from "./deps.ts";
import { startApiBackground } from "./loops/api-background.ts";

interface DenoServer {
  finished: Promise<void>;
  shutdown(): Promise<void>;
  addr: { port: number; hostname: string };
}
interface DenoRuntime {
  serve(
    options: {
      port: number;
      hostname?: string;
      onListen?: (addr: { port: number; hostname: string }) => void;
    },
    handler: (req: Request, info: { remoteAddr: { hostname: string } }) => Response | Promise<Response>,
  ): DenoServer;
  addSignalListener(signal: "SIGTERM" | "SIGINT", handler: () => void): void;
  exit(code: number): never;
}

const deno = (globalThis as unknown as { Deno?: DenoRuntime }).Deno;
if (!deno) {
  process.stderr.write("src/deno.ts runs under Deno; under Bun start src/server.ts\n");
  process.exit(64);
}

let config: ReturnType<typeof loadConfig>;
try {
  config = loadConfig();
} catch (error) {
  if (error instanceof ConfigError) {
    process.stderr.write(`${error.message}\n`);
    deno.exit(1);
  }
  throw error;
}

const deps = await createDeps(config);
const { logger } = deps;
if (deps.cache && !(await deps.cache.waitReady(2_000)))
  logger.warn("cache not reachable yet; serving anyway, readiness reports it until it is back");
const app = createApp(deps);
const server = deno.serve(
  {
    port: config.settings.Server.Port,
    onListen: (addr) =>
      logger.info("listening", { port: addr.port, runtime: "deno", environment: config.environment }),
  },
  // the socket peer is the client IP's starting point (http/client-ip.ts)
  (req, info) => app.fetch(req, { peerAddress: info.remoteAddr.hostname }),
);
const background = await startApiBackground(deps);

let stopping = false;
const shutdown = async (signal: string) => {
  if (stopping) return;
  stopping = true;
  const timeoutMs = config.settings.Server.ShutdownTimeoutSeconds * 1000;
  // one deadline for the whole drain: requests, background loops and started sends together
  const deadline = Date.now() + timeoutMs;
  logger.info("shutting down", { signal, timeoutMs });
  const backgroundStopped = background.stop(timeoutMs);
  await Promise.race([server.shutdown(), new Promise((r) => setTimeout(r, timeoutMs))]);
  await backgroundStopped;
  // work requests started without waiting (SMS sends) finishes before the database closes
  if (!(await deps.pending.settled(Math.max(0, deadline - Date.now())))) {
    logger.warn("shutdown timeout: background sends still running", { pending: deps.pending.size });
  }
  await closeDeps(deps);
  logger.info("stopped");
  logger.flush();
  deno.exit(0);
};
deno.addSignalListener("SIGTERM", () => void shutdown("SIGTERM"));
deno.addSignalListener("SIGINT", () => void shutdown("SIGINT"));
