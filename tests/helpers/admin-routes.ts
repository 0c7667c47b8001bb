import type { Hono } from "hono";
import type { Deps } from "../../src/deps.ts";
import { requestIdLogHeaders } from "../../src/http/middleware/request.ts";
import { problemJson, toAppError } from "../../src/http/problem-json.ts";
import { type AppEnv, createRouter, type Router } from "../../src/http/request-context.ts";

// biome-ignore lint/suspicious/noExplicitAny: any route table of the app (each router has its own schema type)
type Routes = Hono<AppEnv, any, string>;

/**
 * Admin routes alone, behind the same edge middleware as the app, with what the platform-admin
 * guard leaves for the handlers: a platform admin's principal. The real app with its guard is
 * exercised in jobs-admin-auth.test.ts and route-security.test.ts.
 */
export function platformAdminRoutes(deps: Deps, ...routes: Routes[]): Router {
  const app = createRouter();
  app.use(requestIdLogHeaders({ logger: deps.logger, trustedProxies: [] }));
  app.onError((error, c) => problemJson(c, toAppError(error)));
  app.use(async (c, next) => {
    c.set("principal", {
      userId: "00000000-0000-4000-8000-000000000001",
      tenantId: null,
      roles: [],
      platformRoles: ["platform_admin"],
      sessionId: "s",
    });
    await next();
  });
  for (const r of routes) app.route("/", r);
  return app;
}
