import { Scalar } from "@scalar/hono-api-reference";
import { cors } from "hono/cors";
import { RegExpRouter } from "hono/router/reg-exp-router";
import { SmartRouter } from "hono/router/smart-router";
import { TrieRouter } from "hono/router/trie-router";
import { normaliseOrigin } from "./auth/origins.ts";
import type { Deps } from "./deps.ts";
import { AppError } from "./errors.ts";
import { createRouter } from "./http/context.ts";
import { HttpError, problemJson, statusOf, toAppError } from "./http/errors.ts";
import { authenticate } from "./http/middleware/auth.ts";
import { requirePlatformAdmin, requireTenantUser } from "./http/middleware/guards.ts";
import { rateLimit, rateLimitPolicies } from "./http/middleware/rate-limit.ts";
import { limitBody, requestIdLogHeaders } from "./http/middleware/request.ts";
import { traceRequests } from "./http/middleware/telemetry.ts";
import { resolveTenancy } from "./http/middleware/tenancy.ts";
import { adminBillingRoutes } from "./http/routes/admin-billing.ts";
import { adminJobRoutes } from "./http/routes/admin-jobs.ts";
import { adminProviderRoutes } from "./http/routes/admin-providers.ts";
import { adminSecretRoutes } from "./http/routes/admin-secrets.ts";
import { adminTenantRoutes } from "./http/routes/admin-tenants.ts";
import { authRoutes, CREDENTIAL_PATHS } from "./http/routes/auth.ts";
import { adminDomainRoutes, tenantDomainRoutes, tlsPermissionRoutes } from "./http/routes/custom-domains.ts";
import { healthRoutes } from "./http/routes/health.ts";
import { paymentWebhookRoutes } from "./http/routes/payment-webhooks.ts";
import { planRoutes } from "./http/routes/plans.ts";
import { tenantFeatureRoutes } from "./http/routes/tenant-features.ts";
import { tenantStorageRoutes } from "./http/routes/tenant-storage.ts";
import { adminUserRoutes, tenantUserRoutes } from "./http/routes/users.ts";
import { wellKnownRoutes } from "./http/routes/well-known.ts";
import { describeError } from "./redact.ts";

/** Request headers allowed cross-origin when `Cors:Headers` is empty (Production requires the list). */
const DEFAULT_CORS_HEADERS = ["content-type", "authorization", "x-request-id", "x-csrf-token", "x-tenant"];

const METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"] as const;

/**
 * The methods the app's routes answer on a path (HEAD with GET), from its route table; built on
 * first use, once every route is registered. Middleware (`ALL`) does not count.
 */
function methodsByPath(routes: () => readonly { method: string; path: string }[]) {
  let router: SmartRouter<string> | undefined;
  return (path: string): string[] => {
    if (!router) {
      router = new SmartRouter<string>({ routers: [new RegExpRouter(), new TrieRouter()] });
      for (const route of routes())
        if (route.method !== "ALL") router.add(route.method, route.path, route.method);
    }
    const found: string[] = METHODS.filter(
      (method) => (router as SmartRouter<string>).match(method, path)[0].length > 0,
    );
    if (found.includes("GET")) found.splice(1, 0, "HEAD");
    return found;
  };
}

/** Builds the HTTP app from its dependencies: no globals, so tests build it with their own. */
export function createApp(deps: Deps) {
  const app = createRouter();
  const settings = deps.config.settings;
  // outermost, so the request's log line is written inside its span and carries the trace id
  if (deps.telemetry.enabled) app.use(traceRequests(deps.telemetry));
  app.use(
    requestIdLogHeaders({ logger: deps.logger, trustedProxies: settings.Tenancy.Resolution.TrustedProxies }),
  );
  // Probes come before the host check, CORS, rate limits and the body limit, so none of those run
  // for them: orchestrators probe pods by IP rather than by name, a throttled readiness check would
  // take the pod out of service, and the probes read no body. They still get the request id, the
  // log line and the security headers.
  app.route("/", healthRoutes(deps));
  app.use(resolveTenancy({ settings, environment: deps.config.environment, lookup: deps.tenants }));
  if (settings.Cors.Origins.length > 0) {
    const origins = new Set(settings.Cors.Origins.map(normaliseOrigin));
    app.use(
      cors({
        // unlisted origins get no CORS headers at all, preflight or not
        origin: (origin) => (origins.has(normaliseOrigin(origin)) ? origin : null),
        allowMethods: settings.Cors.Methods,
        // never an empty list: hono/cors would then echo whatever headers a preflight asks for
        allowHeaders: settings.Cors.Headers.length > 0 ? settings.Cors.Headers : DEFAULT_CORS_HEADERS,
        credentials: settings.Cors.AllowCredentials,
        exposeHeaders: ["x-request-id", "ratelimit", "ratelimit-policy", "retry-after"],
        maxAge: 600,
      }),
    );
  }
  const policies = rateLimitPolicies(deps.config.settings, deps.config.environment);
  const limiter = { store: deps.counters, clock: deps.clock, logger: deps.logger };
  app.use(rateLimit(policies.global, limiter));
  const authLimit = rateLimit(policies.auth, limiter);
  for (const path of CREDENTIAL_PATHS) app.use(path, authLimit);
  app.use(limitBody(deps.config.settings.Server.MaxBodyBytes));

  app.onError((error, c) => {
    const problem = toAppError(error);
    if (error instanceof AppError && error.code === "unavailable") {
      // a deliberate 503 (fail-closed: the cache behind security windows or rate limits is down);
      // where it was decided logged the cause, so no stack, and not an "unhandled error"
      deps.logger.warn("request refused: temporarily unavailable", {
        requestId: c.get("requestId"),
        path: c.req.path,
        detail: error.message,
      });
    } else if (statusOf[problem.code] >= 500) {
      // never error.message as is: a failed query's message carries its parameter values
      deps.logger.error("unhandled error", {
        requestId: c.get("requestId"),
        error: describeError(error, deps.redactor.text, { stack: true }),
      });
    }
    return problemJson(c, problem);
  });
  // a path that exists under other methods is 405 with Allow, not 404 (which would say it does not exist)
  const allowedMethods = methodsByPath(() => app.routes);
  app.notFound((c) => {
    const allowed = allowedMethods(c.req.path);
    if (allowed.length === 0) return problemJson(c, new AppError("not_found", "No such resource."));
    return problemJson(
      c,
      new HttpError("method_not_allowed", `This resource answers ${allowed.join(", ")}.`, {
        allow: allowed.join(", "),
      }),
    );
  });

  // every guard once, here: a `/x/*` pattern also matches `/x` itself
  const authenticated = authenticate(deps);
  app.use("/api/admin/*", authenticated, requirePlatformAdmin());
  app.use("/api/tenant/*", authenticated, requireTenantUser());
  app.use("/api/tenant/users/*", requireTenantUser(["owner"]));
  app.use("/api/tenant/domains/*", requireTenantUser(["owner"]));

  app.route("/", wellKnownRoutes(deps));
  app.route("/", authRoutes(deps, authenticated));
  app.route("/", adminUserRoutes(deps));
  app.route("/", adminJobRoutes(deps));
  app.route("/", tenantUserRoutes(deps));
  app.route("/", adminTenantRoutes(deps));
  app.route("/", adminProviderRoutes(deps));
  app.route("/", adminSecretRoutes(deps));
  app.route("/", tenantStorageRoutes(deps));
  app.route("/", adminDomainRoutes(deps));
  app.route("/", tenantDomainRoutes(deps));
  app.route("/", tlsPermissionRoutes(deps));
  app.route("/", adminBillingRoutes(deps));
  app.route("/", tenantFeatureRoutes(deps));
  app.route("/", planRoutes(deps));
  app.route("/", paymentWebhookRoutes(deps));

  app.openAPIRegistry.registerComponent("securitySchemes", "bearer", {
    type: "http",
    scheme: "bearer",
    bearerFormat: "JWT",
  });
  app.doc31("/api/openapi.json", {
    openapi: "3.1.0",
    info: { title: "Plinth API", version: "0.1.0", description: "Multi-tenant SaaS API foundation." },
  });
  // a reference page over the document above (the page loads its viewer script from a CDN)
  app.get("/api/docs", Scalar({ url: "/api/openapi.json", pageTitle: "Plinth API" }));
  return app;
}

export type App = ReturnType<typeof createApp>;
