/**
 * The API process under Deno: `deno run -A src/deno.ts` (Deno 2 from the npm registry; the packages
 * come from node_modules, installed by `bun install`). The same lifecycle as src/server.ts
 * (src/lifecycle.ts); what differs is the server (`Deno.serve`) and the signal handling.
 * Migrations are run by the Bun migrator (`bun run migrate`) beforehand.
 */
import { type RuntimeAdapter, runApi } from "./lifecycle.ts";

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

/** Deno's side of the lifecycle: `Deno.serve` and Deno's signal listeners. */
const adapter: RuntimeAdapter = {
  listeningFields: { runtime: "deno" },
  serve(app, _deps, port) {
    return new Promise((resolve) => {
      const server = deno.serve(
        // onListen replaces Deno's own "Listening on" line, which is not a JSON log line
        { port, onListen: (addr) => resolve({ port: addr.port, drain: () => server.shutdown() }) },
        // the socket peer is the client IP's starting point (http/client-ip.ts)
        (req, info) => app.fetch(req, { peerAddress: info.remoteAddr.hostname }),
      );
    });
  },
  onSignal(handler) {
    // a second signal while draining changes nothing
    let signalled = false;
    const on = (signal: "SIGTERM" | "SIGINT") => () => {
      if (signalled) return;
      signalled = true;
      handler(signal);
    };
    deno.addSignalListener("SIGTERM", on("SIGTERM"));
    deno.addSignalListener("SIGINT", on("SIGINT"));
  },
  exit: (code) => deno.exit(code),
};

deno.exit(await runApi(adapter));
