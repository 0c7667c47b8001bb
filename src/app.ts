import type { ErrorHandler, MiddlewareHandler } from "hono";
import { cors } from "hono/cors";
import { RegExpRouter } from "hono/router/reg-exp-router";
import { SmartRouter } from "hono/router/smart-router";
import { TrieRouter } from "hono/router/trie-router";
import { recordAuditLimited } from "./audit/record.ts";
import { normaliseOrigin } from "./auth/origins.ts";
import { PlanRateLimits } from "./billing/plan-rate-limits.ts";
import type { Settings } from "./config/schema.ts";
import { describeDatabaseFailure, failureSummary } from "./db/database-failure.ts";
import type { Deps } from "./deps.ts";
import { AppError } from "./errors.ts";
import { AREAS } from "./http/areas.ts";
import { trustedProxies } from "./http/client-ip.ts";
import { CONSOLE_CREDENTIAL_PATHS, consoleRoutes } from "./http/console/routes.ts";
import { type FastLane, fastLane } from "./http/fast-lane.ts";
import { meterApiCalls } from "./http/middleware/api-calls.ts";
import { authenticate } from "./http/middleware/authenticate.ts";
import { guardOf } from "./http/middleware/guards.ts";
import {
  advertisePolicies,
  apiKeyPolicy,
  byApiKey,
  byCaller,
  rateLimit,
  rateLimiter,
  rateLimitPolicies,
  tenantRateLimit,
} from "./http/middleware/rate-limit.ts";
import { chainMiddleware, guardRequest, requestIdLogHeaders } from "./http/middleware/request.ts";
import { tenancyResolver } from "./http/middleware/tenancy.ts";
import { traceRequests } from "./http/middleware/tracing.ts";
import { DOCUMENT_TAGS, registerComponents, registerDocumentRoutes } from "./http/openapi.ts";
import { HttpError, isDatabaseOutage, problemJson, statusOf, toAppError } from "./http/problem-json.ts";
import { type AppEnv, createRouter, ctxOf } from "./http/request-context.ts";
import { CREDENTIAL_PATHS, WINDOW_KINDS } from "./http/routes/auth.ts";
import { docsRoutes } from "./http/routes/docs.ts";
import { healthRoutes } from "./http/routes/health.ts";
import { registerWebhookDocs } from "./http/routes/webhook-events.ts";
import { SCIM_BASE, scimErrorResponse } from "./http/scim-protocol.ts";
import { describeError } from "./redact.ts";
import { windowPolicies } from "./security/windows.ts";
import { testSendPolicies } from "./webhooks/test-webhook-endpoint.ts";

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

/** CORS for the listed origins only: an unlisted origin gets no CORS headers, preflight or not. */
function corsOf(settings: Settings["Cors"]) {
  const origins = new Set(settings.Origins.map(normaliseOrigin));
  return cors({
    origin: (origin) => (origins.has(normaliseOrigin(origin)) ? origin : null),
    allowMethods: settings.Methods,
    // never an empty list: hono/cors would then echo whatever headers a preflight asks for
    allowHeaders: settings.Headers.length > 0 ? settings.Headers : DEFAULT_CORS_HEADERS,
    credentials: settings.AllowCredentials,
    exposeHeaders: ["x-request-id", "ratelimit", "ratelimit-policy", "retry-after"],
    maxAge: 600,
  });
}

/**
 * Every error as problem+json: a refusal of a signed-in caller is audited, a deliberate 503 is a
 * warning, anything else over 500 is logged once (redacted); an unknown path is 404 and a path that
 * exists under other methods 405 with Allow.
 */
function answerErrors(app: Router, onError: ErrorHandler<AppEnv>): void {
  app.onError(onError);
  // a path that exists under other methods is 405 with Allow, not 404 (which would say it does not exist)
  const allowedMethods = methodsByPath(() => app.routes);
  app.notFound((c) => {
    const allowed = allowedMethods(c.req.path);
    const answer = isScimPath(c.req.path) ? scimErrorResponse : problemJson;
    if (allowed.length === 0) return answer(c, new AppError("not_found", "No such resource."));
    return answer(
      c,
      new HttpError("method_not_allowed", `This resource answers ${allowed.join(", ")}.`, {
        allow: allowed.join(", "),
      }),
    );
  });
}

/** The app's error handler (`answerErrors`; the request line's checks answer their errors with it too). */
function errorHandlerOf(deps: Deps): ErrorHandler<AppEnv> {
  return async (error, c) => {
    const problem = toAppError(error);
    // a signed-in caller refused by a guard or a domain rule: recorded, rate limited (docs/audit.md)
    if (problem.code === "forbidden" && c.get("principal"))
      await recordAuditLimited(deps, ctxOf(c), {
        action: "authorization.refused",
        outcome: "denied",
        details: { httpMethod: c.req.method, path: c.req.path, reason: problem.message },
      });
    if (isDatabaseOutage(error)) {
      // a 503 with Retry-After: the class and code say why (a cut connection, a database down), no stack
      deps.logger.warn("request refused: database unavailable", {
        requestId: c.get("requestId"),
        path: c.req.path,
        cause: failureSummary(describeDatabaseFailure(error)),
      });
    } else if (error instanceof AppError && error.code === "unavailable") {
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
    // a SCIM client reads SCIM errors (RFC 7644 §3.12), whatever raised them
    if (isScimPath(c.req.path)) return scimErrorResponse(c, problem);
    return problemJson(c, problem);
  };
}

const isScimPath = (path: string) => path === SCIM_BASE || path.startsWith(`${SCIM_BASE}/`);

/** Every area's routers, in the order of src/http/areas.ts (each route declares who may call it). */
function mountRoutes(app: Router, deps: Deps, authenticated: MiddlewareHandler<AppEnv>): void {
  for (const area of AREAS) for (const routes of area.routes) app.route("/", routes(deps, authenticated));
}

/** The OpenAPI document at /api/openapi.json, a public operation like the others. */
function serveDocument(app: Router, settings: Settings): void {
  registerComponents(app);
  registerDocumentRoutes(app);
  registerWebhookDocs(app);
  const document: Parameters<typeof app.getOpenAPI31Document>[0] = {
    openapi: "3.1.0",
    info: {
      title: "Plinth API",
      version: "0.1.0",
      description:
        "Multi-tenant SaaS API foundation. Every error is `application/problem+json` (the `Problem` schema). " +
        "A method a path does not answer gets 405 `method_not_allowed` with `Allow`; an unknown path 404.",
      // `identifier` is OpenAPI 3.1 (SPDX); the generator's LicenseObject type predates it
      license: { name: "MIT", identifier: "MIT" } as { name: string },
      contact: { name: "Plinth maintainers" },
    },
    tags: DOCUMENT_TAGS,
  };
  // `servers` is an absolute URL, so a generated client needs no hand-set base URL: the configured
  // public base URL, else the origin the document was requested at (a host the host check allowed)
  const publicBaseUrl = settings.Server.PublicBaseUrl?.replace(/\/+$/, "");
  // a public operation like the others, its access declared (registerDocumentRoutes describes it)
  app.get("/api/openapi.json", guardOf("public"), (c) => {
    const url = publicBaseUrl ?? new URL(c.req.url).origin;
    const servers = [{ url, description: "The API's base URL." }];
    return c.json(app.getOpenAPI31Document({ ...document, servers }));
  });
}

/** Builds the HTTP app from its dependencies: no globals, so tests build it with their own. */
export function createApp(deps: Deps) {
  const app = createRouter();
  const settings = deps.config.settings;
  // outermost, so the request's log line is written inside its span and carries the trace id
  if (deps.telemetry.enabled) app.use(traceRequests(deps.telemetry));
  const policies = rateLimitPolicies(deps.config.settings, deps.config.environment);
  const limiter = { store: deps.counters, clock: deps.clock, logger: deps.logger };
  const probes = healthRoutes(deps);
  const onError = errorHandlerOf(deps);
  // Every request but a probe's then passes, in this one step (`requestIdLogHeaders`' checks): CORS,
  // then the per-client limit, which decides before any database work (the host, custom-domain and
  // tenant-code lookups come after it, so a client over its limit costs no query: docs/cache.md).
  // The probes skip them: orchestrators probe pods by IP rather than by name, a throttled readiness
  // check would take the pod out of service, and the probes read no body. They still get the
  // request id, the log line and the security headers.
  const globalLimit = rateLimiter(policies.global, limiter);
  const tenancy = tenancyResolver({ settings, environment: deps.config.environment, lookup: deps.tenants });
  const checks = [globalLimit.middleware(byCaller(deps)), tenancy.middleware];
  if (settings.Cors.Origins.length > 0) checks.unshift(corsOf(settings.Cors));
  app.use(
    requestIdLogHeaders({
      logger: deps.logger,
      trustedProxies: settings.Tenancy.Resolution.TrustedProxies,
      checks: {
        run: chainMiddleware(...checks),
        exempt: new Set(probes.routes.filter((route) => route.method === "GET").map((route) => route.path)),
        onError,
      },
    }),
  );
  app.route("/", probes);
  const authLimit = rateLimit(policies.auth, limiter);
  for (const path of [...CREDENTIAL_PATHS, ...CONSOLE_CREDENTIAL_PATHS]) app.use(path, authLimit);
  for (const [path, kind] of Object.entries(WINDOW_KINDS))
    app.use(path, advertisePolicies(windowPolicies(deps.config.settings, kind)));
  app.use("/api/tenant/webhooks/:id/test", advertisePolicies(testSendPolicies(deps.config.settings)));
  // the body limits, then one guard for every operation (text PostgreSQL cannot store is a 400
  // naming the field, never a 500), then no-store on an authenticated answer
  app.use(guardRequest(deps.config.settings.Server.MaxBodyBytes));

  answerErrors(app, onError);

  // Who may call a route is declared on it (`apiRoute`'s access, src/http/access.ts) and checked by
  // its own guard (docs/roles.md). Authentication is mounted once per area, here, so that a path of
  // the area answers 401 to a request without credentials before it is found (or not): a `/x/*`
  // pattern also matches `/x` itself.
  const authenticated = authenticate(deps);
  app.use("/api/admin/*", authenticated);
  // an API key has a bucket of its own (`RateLimiting:ApiKey`), counted once the key is known to be
  // valid and before its scopes are checked: a key over its limit gets 429, never 401 or 403
  const apiKeyLimit = rateLimit(apiKeyPolicy(settings), limiter, byApiKey);
  app.use("/api/tenant/*", authenticated, apiKeyLimit);
  // then the tenant's own bucket, of its plan's size (all its users and keys together): a noisy
  // tenant is refused without touching another's (docs/billing.md, "Request rate per tenant")
  const planLimits = new PlanRateLimits(deps, settings.RateLimiting.Tenant.PlanSeconds);
  if (settings.RateLimiting.Tenant.Enabled)
    app.use(
      "/api/tenant/*",
      tenantRateLimit((tenantId) => planLimits.perMinute(tenantId), limiter),
    );
  // then counted as api_calls, and refused past the plan's month (docs/billing.md, "api_calls")
  if (settings.FeatureUsageReconciliation.CountApiCalls)
    app.use(
      "/api/tenant/*",
      meterApiCalls(deps.apiCalls, (tenantId) => planLimits.apiCallsPerMonth(tenantId)),
    );

  mountRoutes(app, deps, authenticated);

  serveDocument(app, settings);
  // a reference page over the document above, its viewer served from here (no CDN)
  app.route("/", docsRoutes());
  // the operator console: server-rendered pages for platform staff (docs/console.md)
  app.route("/", consoleRoutes(deps));
  // `GET /api/auth/me` finished at the edge when all it needs is remembered (src/http/fast-lane.ts),
  // from the same limiter and resolver as the checks above; off with telemetry (the request gets
  // the app's span and metric, as the liveness probe does) and with CORS (hono/cors writes those)
  const fast: FastLane | undefined =
    deps.telemetry.enabled || settings.Cors.Origins.length > 0
      ? undefined
      : fastLane({
          deps,
          logger: deps.logger,
          trusted: trustedProxies(settings.Tenancy.Resolution.TrustedProxies),
          global: globalLimit,
          tenancy,
        });
  return Object.assign(app, { fastLane: fast });
}

export type App = ReturnType<typeof createApp>;
type Router = ReturnType<typeof createRouter>;
