import { randomBytes } from "node:crypto";
import { createApp } from "../../src/app.ts";
import type { Clock } from "../../src/clock.ts";
import { type AppConfig, loadConfig } from "../../src/config/load.ts";
import type { Environment } from "../../src/config/schema.ts";
import type { Database } from "../../src/db/client.ts";
import { createDeps, type Deps } from "../../src/deps.ts";
import type { CounterStore } from "../../src/security/counter-store.ts";
import { rsaKeys, validProductionEnv } from "./production-env.ts";

/**
 * Configuration for a test app: Development defaults plus `settings` (`Section:Key`), the cache URL
 * (null: none) and, for failure-mode tests, the environment the app should believe it runs in.
 * Production's start-up checks are not repeated here (tests/integration covers them elsewhere).
 */
export function testConfig(
  options: { settings?: Record<string, string>; cacheUrl?: string | null; environment?: Environment } = {},
): AppConfig {
  const env: Record<string, string> = {
    PLINTH_ENVIRONMENT: "Development",
    DATABASE_URL: "postgres://unused",
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
  return { ...config, environment: options.environment ?? "Development" };
}

export async function testDeps(
  config: AppConfig,
  input: {
    database: Database;
    clock?: Clock;
    cachePrefix?: string;
    waitForCache?: boolean;
    counters?: CounterStore;
  },
): Promise<Deps> {
  const deps = await createDeps(config, {
    database: input.database,
    clock: input.clock,
    cachePrefix: input.cachePrefix,
    counters: input.counters,
    logWrite: () => {},
  });
  if (deps.cache && input.waitForCache !== false) await deps.cache.waitReady(3_000);
  return deps;
}

export interface TestApp {
  deps: Deps;
  app: ReturnType<typeof createApp>;
  logs: string[];
  /** A request as if from `peer` (the socket address; default 127.0.0.1). */
  request(path: string, init?: RequestInit, peer?: string): Promise<Response>;
  close(): Promise<void>;
}

/** Loads configuration from `env` alone (no appsettings files) for a test. */
export function envConfig(
  env: Record<string, string | undefined> = {},
  configDir = "/nonexistent",
): AppConfig {
  return loadConfig({ env: { Logging__Level: "debug", ...env }, configDir });
}

/** The real app over the given database, with its log lines captured. */
export async function createTestApp(options: {
  database: Database;
  env?: Record<string, string | undefined>;
  config?: AppConfig;
  clock?: Clock;
}): Promise<TestApp> {
  const logs: string[] = [];
  const config = options.config ?? envConfig(options.env);
  const deps = await createDeps(config, {
    database: options.database,
    clock: options.clock,
    logWrite: (l) => logs.push(l),
  });
  const app = createApp(deps);
  return {
    deps,
    app,
    logs,
    request: async (path, init, peer = "127.0.0.1") =>
      app.fetch(new Request(path.startsWith("http") ? path : `http://localhost${path}`, init), {
        peerAddress: peer,
      }),
    close: async () => {
      await deps.cache?.close();
    },
  };
}
