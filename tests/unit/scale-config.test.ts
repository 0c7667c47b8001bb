import { describe, expect, test } from "bun:test";
import { parseRedisClusterUrl } from "../../src/cache/cluster-url.ts";
import { cacheScheme } from "../../src/cache/index.ts";
import type { ConfigError } from "../../src/config/config-error.ts";
import { loadConfig } from "../../src/config/load.ts";
import { checkProduction } from "../../src/config/production.ts";

const load = (env: Record<string, string>, overrides: Record<string, string> = {}) =>
  loadConfig({
    env: { DATABASE_URL: "postgres://app@pooler:6432/db", ...env },
    configDir: "/nonexistent",
    overrides,
  });

describe("Redis Cluster URLs", () => {
  test("hosts, credentials and TLS come from the URL; cluster=true marks it", () => {
    expect(parseRedisClusterUrl("redis://h1:7000,h2:7001,h3?cluster=true")).toEqual({
      nodes: [
        { host: "h1", port: 7000 },
        { host: "h2", port: 7001 },
        { host: "h3", port: 6379 },
      ],
      tls: false,
    });
    expect(parseRedisClusterUrl("rediss://app:p%40ss@10.0.0.1:6380,[::1]:6381?cluster=true")).toEqual({
      nodes: [
        { host: "10.0.0.1", port: 6380 },
        { host: "::1", port: 6381 },
      ],
      username: "app",
      password: "p@ss",
      tls: true,
    });
    expect(parseRedisClusterUrl("redis://:secret@h1:1?cluster=true")?.password).toBe("secret");
  });

  test("a URL without cluster=true is a single node (null); a bad port is refused", () => {
    expect(parseRedisClusterUrl("redis://h1:6379")).toBeNull();
    expect(parseRedisClusterUrl("redis://h1:6379?cluster=false")).toBeNull();
    expect(parseRedisClusterUrl("https://x.upstash.io?cluster=true")).toBeNull();
    expect(() => parseRedisClusterUrl("redis://h1:99999,h2:1?cluster=true")).toThrow(/port/);
    expect(cacheScheme("rediss://h1:1,h2:2?cluster=true")).toBe("redis");
  });

  test("the password of a cluster URL is a secret; Production accepts the URL", () => {
    const config = load({ CACHE_URL: "redis://:cluster-pass-123@h1:7000,h2:7001?cluster=true" });
    expect(config.secretValues).toContain("cluster-pass-123");
    expect(
      checkProduction(config).filter(
        (p) => p.key === "CACHE_URL" || p.key.startsWith("ConnectionStrings:Cache"),
      ),
    ).toEqual([]);
  });
});

describe("transaction pooling settings", () => {
  test("session is the default pool mode, with no direct URL", () => {
    const config = load({});
    expect(config.database.poolMode).toBe("session");
    expect(config.database.directUrl).toBeUndefined();
  });

  test("DATABASE_DIRECT_URL and Database:PoolMode; ConnectionStrings:DatabaseDirect wins; both are secrets", () => {
    const config = load({
      DATABASE_DIRECT_URL: "postgres://app:direct-pw-1@db:5432/db",
      Database__PoolMode: "transaction",
    });
    expect(config.database.poolMode).toBe("transaction");
    expect(config.database.directUrl).toBe("postgres://app:direct-pw-1@db:5432/db");
    expect(config.secretValues).toContain("direct-pw-1");
    const setting = load(
      { DATABASE_DIRECT_URL: "postgres://a@db/x" },
      { "ConnectionStrings:DatabaseDirect": "postgres://b@db/x" },
    );
    expect(setting.database.directUrl).toBe("postgres://b@db/x");
  });

  test("an unknown pool mode and a direct URL that is not postgres:// are refused by key", () => {
    const problemKeys = (env: Record<string, string>) => {
      try {
        load(env);
        return [];
      } catch (error) {
        return (error as ConfigError).problems.map((p) => p.key);
      }
    };
    expect(problemKeys({ Database__PoolMode: "statement" })).toContain("Database:PoolMode");
    expect(problemKeys({ DATABASE_DIRECT_URL: "mysql://x" })).toContain("ConnectionStrings:DatabaseDirect");
  });

  test("embedded PGlite has no pooler: session mode, no direct URL", () => {
    const config = load({
      DATABASE_URL: "pglite:memory:",
      DATABASE_DIRECT_URL: "postgres://a@db/x",
      Database__PoolMode: "transaction",
    });
    expect(config.database.poolMode).toBe("session");
    expect(config.database.directUrl).toBeUndefined();
  });
});
