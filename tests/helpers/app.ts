import { afterAll, beforeAll } from "bun:test";
import { randomBytes } from "node:crypto";
import { type App, createApp } from "../../src/app.ts";
import type { Clock } from "../../src/clock.ts";
import { type AppConfig, loadConfig } from "../../src/config/load.ts";
import type { Environment } from "../../src/config/schema.ts";
import type { Database, Db } from "../../src/db/client.ts";
import { createDeps, type Deps } from "../../src/deps.ts";
import { clientIp } from "../../src/http/client-ip.ts";
import type { CounterStore } from "../../src/security/counter-store.ts";
import { assertAllowed } from "../../src/security/windows.ts";
import type { HostResolver } from "../../src/webhooks/destinations.ts";
import { REDIS_URL, rawRedis, uniquePrefix } from "./cache.ts";
import { stopChildren } from "./children.ts";
import { appDatabaseOf, createTestDatabase, type TestDatabase } from "./database.ts";
import { type OpenApiDocument, responseValidator } from "./openapi-validator.ts";
import { rsaKeys, validProductionEnv } from "./production-env.ts";

/**
 * Configuration for a test app: Development defaults plus `env` (variables as the real loader reads
 * them), `settings` (`Section:Key`), the cache URL (null: none) and, for failure-mode tests, the
 * environment the app should believe it runs in. Production's start-up checks are not repeated
 * here (tests/integration covers them elsewhere).
 */
export function testConfig(
  options: {
    settings?: Record<string, string>;
    env?: Record<string, string | undefined>;
    cacheUrl?: string | null;
    environment?: Environment;
  } = {},
): AppConfig {
  const env: Record<string, string | undefined> = {
    PLINTH_ENVIRONMENT: "Development",
    DATABASE_URL: "postgres://unused",
    ...options.env,
  };
  if (options.cacheUrl) env.CACHE_URL = options.cacheUrl;
  const overrides: Record<string, string> = { ...options.settings };
  if (options.environment === "Production") {
    // what Production start-up would insist on, made at test time
    const keys = rsaKeys();
    overrides["Security:Jwt:CurrentKeyId"] ??= "test-key";
    overrides["Security:Jwt:PrivateKey"] ??= keys.privateKeyPem;
    overrides["Authentication:Sms:CodePepper"] ??= randomBytes(32).toString("base64");
    overrides["AllowedHosts:0"] ??= "localhost";
    const production = validProductionEnv();
    overrides["Security:DataProtection:CertificatePath"] ??=
      production.PLINTH_DATA_PROTECTION_CERTIFICATE_PATH ?? "";
    overrides["Security:DataProtection:CertificatePassword"] ??=
      production.PLINTH_DATA_PROTECTION_CERTIFICATE_PASSWORD ?? "";
  }
  const config = loadConfig({ env, configDir: "/nonexistent", overrides });
  return { ...config, environment: options.environment ?? config.environment };
}

/**
 * The rate limits raised out of the way, for a file that signs in or calls routes more often than
 * one client would: `useTestApp({ settings: { ...relaxedLimits, ... } })`. A test of the limits
 * themselves sets its own.
 */
export const relaxedLimits: Readonly<Record<string, string>> = {
  "RateLimiting:Global:PermitLimit": "100000",
  "RateLimiting:Global:WindowSeconds": "60",
  "RateLimiting:Auth:PermitLimit": "100000",
  "RateLimiting:Auth:WindowSeconds": "60",
  // the per-tenant rate of the plan (free: 600 a minute); tests/integration/tenant-rate-limit.test.ts keeps it
  "RateLimiting:Tenant:Enabled": "false",
  // and the plan's api_calls a month (free: 10,000), counted and refused past (tenant-rate-limit.test.ts)
  "FeatureUsageReconciliation:CountApiCalls": "false",
};

/** `Section:Key` settings as the environment variables a process reads (`Section__Key`). */
export function settingsEnv(settings: Readonly<Record<string, string>>): Record<string, string> {
  return Object.fromEntries(
    Object.entries(settings).map(([key, value]) => [key.replaceAll(":", "__"), value]),
  );
}

/** Loads configuration from `env` alone (no appsettings files) for a test. */
export function envConfig(
  env: Record<string, string | undefined> = {},
  configDir = "/nonexistent",
): AppConfig {
  return loadConfig({ env: { Logging__Level: "debug", ...env }, configDir });
}

/** The one way tests build Deps: over the given database, log lines to `logs` (or nowhere). */
export async function testDeps(
  config: AppConfig,
  input: {
    database: Database;
    clock?: Clock;
    cachePrefix?: string;
    waitForCache?: boolean;
    counters?: CounterStore;
    logs?: string[];
    hostResolver?: HostResolver;
  },
): Promise<Deps> {
  const logs = input.logs;
  const deps = await createDeps(config, {
    // the app under test connects as the API role (plinth_app) unless PLINTH_TEST_API_ROLE=owner (tests/helpers/database.ts)
    database: appDatabaseOf(input.database),
    clock: input.clock,
    cachePrefix: input.cachePrefix,
    counters: input.counters,
    hostResolver: input.hostResolver,
    logWrite: logs ? (line) => logs.push(line) : () => {},
  });
  if (deps.cache && input.waitForCache !== false) await deps.cache.waitReady(3_000);
  return deps;
}

export interface TestApp {
  deps: Deps;
  app: App;
  logs: string[];
  /** A request as if from `peer` (the socket address; default 127.0.0.1). */
  request(path: string, init?: RequestInit, peer?: string): Promise<Response>;
  close(): Promise<void>;
}

/** The stand-in routes of `addProbeRoutes`: test-only, not in the document. */
const PROBE_PATHS = ["/api/auth/probe-login", "/api/probe"];

/**
 * Every answer of `app` (through `app.fetch` and `app.request`) is checked against the app's own
 * OpenAPI document (tests/helpers/openapi-validator.ts); a mismatch throws, failing the test.
 * Routes a test adds to the app after this call (its own stand-ins) are not checked.
 */
export function validateResponses(app: App): App {
  const original = app.fetch;
  const own = app.routes.length;
  const added = () =>
    app.routes
      .slice(own)
      .filter((route) => route.method !== "ALL")
      .map((route) => new RegExp(`^${route.path.replace(/:[^/]+/g, "[^/]+").replace(/\*/g, ".*")}$`));
  let check: ReturnType<typeof responseValidator> | undefined;
  app.fetch = async (request, env, executionCtx) => {
    const response = await original(request, env, executionCtx);
    const path = new URL(request.url).pathname;
    if (added().some((pattern) => pattern.test(path))) return response;
    // the operator console's HTML pages are for browsers, not API operations (docs/console.md);
    // tests/e2e/console*.test.ts and tests/integration/console*.test.ts check them
    if (path === "/console" || path.startsWith("/console/")) return response;
    check ??= responseValidator(
      app.getOpenAPI31Document({
        openapi: "3.1.0",
        info: { title: "test", version: "0" },
      }) as unknown as OpenApiDocument,
      { exempt: PROBE_PATHS },
    );
    await check(request, response);
    return response;
  };
  return app;
}

function appOver(deps: Deps, app: App, logs: string[]): TestApp {
  validateResponses(app);
  return {
    deps,
    app,
    logs,
    request: async (path, init, peer = "127.0.0.1") =>
      app.fetch(new Request(path.startsWith("http") ? path : `http://localhost${path}`, init), {
        peerAddress: peer,
      }),
    close: async () => {
      // the api_calls counted so far, written while the database and cache are open
      await deps.apiCalls.stop().catch(() => {});
      await deps.cache?.close();
    },
  };
}

/** The real app over the given database, with its log lines captured. */
export async function createTestApp(options: {
  database: Database;
  env?: Record<string, string | undefined>;
  config?: AppConfig;
  clock?: Clock;
  /** The cache key prefix (default: the environment's). */
  cachePrefix?: string;
  /** Rate-limit and window counters of its own (default: the cache's, else the database's). */
  counters?: CounterStore;
}): Promise<TestApp> {
  const logs: string[] = [];
  const config = options.config ?? envConfig(options.env);
  const deps = await testDeps(config, {
    database: options.database,
    clock: options.clock,
    cachePrefix: options.cachePrefix,
    counters: options.counters,
    waitForCache: false,
    logs,
  });
  return appOver(deps, createApp(deps), logs);
}

/**
 * Stand-ins for the authentication routes (built elsewhere): a login shaped like the real one as
 * far as the windows go (consume, then verify; reset on success), under /api/auth/.
 */
export function addProbeRoutes(app: App, deps: Deps): App {
  app.post("/api/auth/probe-login", async (c) => {
    const body = (await c.req.json()) as { account: string; password: string };
    assertAllowed(await deps.windows.consume("password", { account: body.account, ip: clientIp(c) }));
    if (body.password !== "right") return c.json({ code: "unauthorized" }, 401);
    await deps.windows.reset("password", { account: body.account, ip: clientIp(c) });
    return c.json({ ok: true });
  });
  app.get("/api/probe", (c) => c.json({ ok: true }));
  return app;
}

type Lazy<T> = T | (() => T);
const evaluate = <T>(value: Lazy<T>): T => (typeof value === "function" ? (value as () => T)() : value);

/** A test database whose fields are read when used: hand it out before `beforeAll` has run. */
function lazyDatabase(current: () => TestDatabase): TestDatabase {
  return {
    get name() {
      return current().name;
    },
    get url() {
      return current().url;
    },
    get directUrl() {
      return current().directUrl;
    },
    get env() {
      return current().env;
    },
    get database() {
      return current().database;
    },
    get appDatabase() {
      return current().appDatabase;
    },
    drop: () => current().drop(),
  };
}

/**
 * A fresh database for this test file: created in `beforeAll`, dropped in `afterAll` once every
 * child process the file started has stopped (tests/helpers/children.ts). The object is usable at
 * once; its fields resolve when read (inside tests and later hooks).
 */
export function useTestDatabase(
  options: { poolSize?: number; empty?: boolean; timeoutMs?: number } = {},
): TestDatabase {
  let t: TestDatabase | undefined;
  beforeAll(async () => {
    t = await createTestDatabase({ poolSize: options.poolSize, empty: options.empty });
  }, options.timeoutMs ?? 60_000);
  afterAll(async () => {
    await stopChildren();
    await t?.drop();
  }, 30_000);
  return lazyDatabase(() => {
    if (!t) throw new Error("the test database is made in beforeAll");
    return t;
  });
}

export interface UseTestAppOptions {
  /** `Section:Key` overrides; a function is read in `beforeAll` (after fixtures have started). */
  settings?: Lazy<Record<string, string>>;
  /** Environment variables as the real loader reads them (`Section__Key`, `STORAGE_BUCKET`...). */
  env?: Lazy<Record<string, string | undefined>>;
  /** The shared Redis under a prefix of its own (named after `cache`), deleted after the file. */
  cache?: string;
  /** Another cache (e.g. a Redis the file owns); no prefix clean-up. */
  cacheUrl?: Lazy<string>;
  environment?: Environment;
  clock?: Clock;
  poolSize?: number;
  /** Adds the stand-in routes of `addProbeRoutes`. */
  probeRoutes?: boolean;
  /** Resolves webhook destinations (host names made to resolve where a test needs). */
  hostResolver?: HostResolver;
  timeoutMs?: number;
}

export interface TestHarness extends TestApp {
  /** The test database (fields resolve when read). */
  readonly testDatabase: TestDatabase;
  readonly db: Db;
  /** The cache key prefix of this file (used with `cache`), deleted after the file. */
  readonly cachePrefix: string;
  /** A raw client on the shared Redis, to look at keys as they are stored (opened when first read). */
  readonly redis: ReturnType<typeof rawRedis>;
}

/**
 * The set-up every integration file repeats: a test database, the real app over it (Development,
 * log lines captured), optional Redis under a prefix of its own, torn down after the file with
 * every child process the file started (tests/helpers/children.ts). Hooks
 * registered before this call run before the app is built (start fixtures there) and their
 * `afterAll` runs before the teardown; hooks registered after it see the app.
 */
export function useTestApp(options: UseTestAppOptions = {}): TestHarness {
  const cachePrefix = uniquePrefix(options.cache ?? "app");
  let redis: ReturnType<typeof rawRedis> | undefined;
  let t: TestDatabase | undefined;
  let built: TestApp | undefined;
  const testDatabase = lazyDatabase(() => {
    if (!t) throw new Error("the test database is made in beforeAll");
    return t;
  });
  const current = (): TestApp => {
    if (!built) throw new Error("the test app is built in beforeAll");
    return built;
  };

  beforeAll(async () => {
    t = await createTestDatabase({ poolSize: options.poolSize });
    const config = testConfig({
      env: { Logging__Level: "debug", ...(options.env ? evaluate(options.env) : {}) },
      settings: options.settings ? evaluate(options.settings) : undefined,
      cacheUrl: options.cache ? REDIS_URL : options.cacheUrl ? evaluate(options.cacheUrl) : null,
      environment: options.environment,
    });
    const logs: string[] = [];
    const deps = await testDeps(config, {
      database: t.database,
      clock: options.clock,
      cachePrefix: options.cache ? cachePrefix : undefined,
      logs,
      hostResolver: options.hostResolver,
    });
    const app = createApp(deps);
    if (options.probeRoutes) addProbeRoutes(app, deps);
    built = appOver(deps, app, logs);
  }, options.timeoutMs ?? 60_000);

  afterAll(async () => {
    await built?.close();
    // after the app's own cache client is closed: a Redis the file started may be among them
    await stopChildren();
    if (options.cache) redis ??= rawRedis();
    if (redis) {
      await redis.cleanup(cachePrefix);
      redis.close();
    }
    await t?.drop();
  }, 30_000);

  return {
    testDatabase,
    cachePrefix,
    get redis() {
      redis ??= rawRedis();
      return redis;
    },
    get db() {
      return testDatabase.database.db;
    },
    get deps() {
      return current().deps;
    },
    get app() {
      return current().app;
    },
    get logs() {
      return current().logs;
    },
    request: (path, init, peer) => current().request(path, init, peer),
    close: () => current().close(),
  };
}
