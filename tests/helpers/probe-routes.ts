import type { App } from "../../src/app.ts";
import type { Deps } from "../../src/deps.ts";
import { clientIp } from "../../src/http/client-ip.ts";
import { assertAllowed } from "../../src/security/windows.ts";

/**
 * Stand-ins for the authentication routes (built elsewhere): a login shaped like the real one as
 * far as the windows go (consume, then verify; reset on success), under /api/auth/.
 */
export function addProbeRoutes(app: App, deps: Deps): App {
  app.post("/api/auth/probe-login", async (c) => {
    const body = (await c.req.json()) as { account: string; password: string };
    assertAllowed(await deps.windows.consume("password", { account: body.account, ip: clientIp(c) }));
    if (body.password !== "right") return c.json({ code: "unauthorized" }, 401);
    await deps.windows.reset("password", { account: body.account });
    return c.json({ ok: true });
  });
  app.get("/api/probe", (c) => c.json({ ok: true }));
  return app;
}
