import { existsSync, mkdtempSync, openSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { tracked } from "./children.ts";
import { ROOT } from "./process.ts";
import { freePort } from "./redis-server.ts";

export interface OwnCaddy {
  httpsPort: number;
  /** Caddy's internal root certificate (exists once Caddy has made its CA). */
  rootCa: string;
  /** Resolves once Caddy's CA exists (it makes it at start), or throws after `timeoutMs`. */
  caReady(timeoutMs?: number): Promise<void>;
  /** The end of Caddy's own log (JSON lines): what to print beside a failed expectation. */
  logTail(lines?: number): string;
  stop(): Promise<void>;
}

/**
 * deploy/caddy/Caddyfile as shipped (Debian's `caddy`), in front of Plinth on `upstreamPort`: its own
 * ports, admin address and data folder, so several run side by side.
 */
export async function ownCaddy(upstreamPort: number): Promise<OwnCaddy> {
  const home = mkdtempSync(join(tmpdir(), "plinth-caddy-"));
  const httpsPort = await freePort();
  const proc = tracked(
    Bun.spawn(["caddy", "run", "--config", join(ROOT, "deploy/caddy/Caddyfile"), "--adapter", "caddyfile"], {
      env: {
        PATH: process.env.PATH ?? "",
        HOME: home,
        XDG_DATA_HOME: join(home, "data"),
        XDG_CONFIG_HOME: join(home, "config"),
        PLINTH_UPSTREAM: `127.0.0.1:${upstreamPort}`,
        CADDY_HTTP_PORT: String(await freePort()),
        CADDY_HTTPS_PORT: String(httpsPort),
        CADDY_ADMIN: `127.0.0.1:${await freePort()}`,
      },
      stdin: "ignore",
      stdout: "ignore",
      // kept so that a refused handshake can be explained (an `ask` that failed, a port in use)
      stderr: openSync(join(home, "caddy.log"), "w"),
    }),
  );
  const logTail = (lines = 20) => {
    const text = existsSync(join(home, "caddy.log")) ? readFileSync(join(home, "caddy.log"), "utf8") : "";
    return text.trimEnd().split("\n").slice(-lines).join("\n");
  };
  const rootCa = join(home, "data/caddy/pki/authorities/local/root.crt");
  return {
    httpsPort,
    rootCa,
    caReady: async (timeoutMs = 45_000) => {
      const deadline = Date.now() + timeoutMs;
      while (!existsSync(rootCa)) {
        if (proc.exitCode !== null) throw new Error(`caddy ended (${proc.exitCode}):\n${logTail()}`);
        if (Date.now() > deadline) throw new Error(`Caddy made no local CA:\n${logTail()}`);
        await Bun.sleep(100);
      }
      // the CA is made before the listeners bind: a port taken meanwhile ends Caddy after it
      while (!logTail(1000).includes('"msg":"serving initial configuration"')) {
        if (proc.exitCode !== null) throw new Error(`caddy ended (${proc.exitCode}):\n${logTail()}`);
        if (Date.now() > deadline) throw new Error(`Caddy is not serving:\n${logTail()}`);
        await Bun.sleep(100);
      }
    },
    logTail,
    stop: async () => {
      proc.kill("SIGTERM");
      await proc.exited;
      rmSync(home, { recursive: true, force: true });
    },
  };
}
