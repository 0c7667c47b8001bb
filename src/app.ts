import { secureHeaders } from "hono/secure-headers";
import type { Deps } from "./deps.ts";
import { clientIp } from "./http/client-ip.ts";
import { createRouter } from "./http/context.ts";
import { ProblemError, problemResponse, toProblem } from "./http/errors.ts";
import { limitBody, requestId, requestLog } from "./http/middleware.ts";
import { rateLimit, rateLimitPolicies } from "./http/rate-limit.ts";
import { healthRoutes } from "./http/routes/health.ts";

/** Builds the HTTP app from its dependencies: no globals, so tests build it with their own. */
export function createApp(deps: Deps) {
  const app = createRouter();
  app.use(requestId());
  app.use(requestLog(deps.logger));
  app.use(secureHeaders());
  app.use(clientIp(deps.config.settings.Tenancy.Resolution.TrustedProxies));
  const policies = rateLimitPolicies(deps.config.settings, deps.config.environment);
  const limiter = { store: deps.counters, clock: deps.clock, logger: deps.logger };
  // probes must never be throttled: a limited readiness check would take the pod out of service
  app.use(
    rateLimit(policies.global, {
      ...limiter,
      skip: (path) => path === "/api/health" || path === "/api/health/ready",
    }),
  );
  app.use("/api/auth/*", rateLimit(policies.auth, limiter));
  app.use(limitBody(deps.config.settings.Server.MaxBodyBytes));

  app.onError((error, c) => {
    const problem = toProblem(error);
    if (problem.status >= 500) {
      deps.logger.error("unhandled error", {
        requestId: c.get("requestId"),
        error:
          error instanceof Error
            ? { name: error.name, message: error.message, stack: error.stack }
            : String(error),
      });
    }
    return problemResponse(c, problem);
  });
  app.notFound((c) => problemResponse(c, new ProblemError("not_found", "No such resource.")));

  app.route("/", healthRoutes(deps));

  app.doc31("/api/openapi.json", {
    openapi: "3.1.0",
    info: { title: "Plinth API", version: "0.1.0", description: "Multi-tenant SaaS API foundation." },
  });
  return app;
}

export type App = ReturnType<typeof createApp>;
