import { createApp } from "../../src/app.ts";
import type { Clock } from "../../src/clock.ts";
import { type AppConfig, loadConfig } from "../../src/config/load.ts";
import type { Database } from "../../src/db/client.ts";
import { createDeps, type Deps } from "../../src/deps.ts";

export interface TestApp {
  deps: Deps;
  app: ReturnType<typeof createApp>;
  logs: string[];
  request(path: string, init?: RequestInit): Promise<Response>;
  close(): Promise<void>;
}

/** Loads configuration from `env` alone (no appsettings files) for a test. */
export function testConfig(
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
  const config = options.config ?? testConfig(options.env);
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
    request: async (path, init) => app.fetch(new Request(`http://localhost${path}`, init)),
    close: async () => {
      await deps.cache?.close();
    },
  };
}
