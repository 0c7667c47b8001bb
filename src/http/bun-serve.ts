import type { Server } from "bun";
import type { App } from "../app.ts";
import type { Deps } from "../deps.ts";
import { bunPeer } from "./client-ip.ts";
import { LIVENESS_PATH, nativeLiveness } from "./routes/health.ts";

/**
 * How Bun serves the app (server.ts, and bench/http.ts, which measures this): the app behind
 * `fetch`, with the socket peer as its binding, and the liveness probe on Bun's own router in
 * front of it (`nativeLiveness`), except with telemetry on, where the probe takes the app's path
 * so it gets its span and duration metric like every other request.
 */
export function bunServeOptions(app: App, deps: Deps) {
  const liveness = deps.telemetry.enabled ? undefined : nativeLiveness(deps);
  return {
    ...(liveness ? { routes: { [LIVENESS_PATH]: { GET: liveness } } } : {}),
    // the socket peer is the client IP's starting point (http/client-ip.ts)
    fetch: (req: Request, server: Server<undefined>) => app.fetch(req, bunPeer(server, req)),
    // the app's limit answers with a problem body; Bun's own, a little higher, stops floods before the app
    maxRequestBodySize: deps.config.settings.Server.MaxBodyBytes + 65_536,
  };
}
