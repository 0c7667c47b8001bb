import { describe, expect, test } from "bun:test";
import { cacheScheme } from "../../src/cache/index.ts";
import { loadConfig } from "../../src/config/load.ts";
import { checkProduction } from "../../src/config/production.ts";

const load = (env: Record<string, string>, overrides: Record<string, string> = {}) =>
  loadConfig({
    env: { DATABASE_URL: "postgres://x@localhost/db", ...env },
    configDir: "/nonexistent",
    overrides,
  });

const cacheProblems = (env: Record<string, string>, overrides: Record<string, string> = {}) =>
  checkProduction(load(env, overrides)).filter(
    (p) => p.key.startsWith("ConnectionStrings:Cache") || p.key === "CACHE_URL",
  );

describe("cache configuration", () => {
  test("the scheme picks the adapter", () => {
    expect(cacheScheme("redis://localhost:6379")).toBe("redis");
    expect(cacheScheme("rediss://:pw@cache:6380")).toBe("redis");
    expect(cacheScheme("https://eu1-x.upstash.io")).toBe("upstash");
    expect(cacheScheme("memcached://x")).toBeNull();
  });

  test("the token comes from ConnectionStrings:CacheToken, else CACHE_TOKEN, and is a secret", () => {
    const fromEnv = load({ CACHE_URL: "https://x.upstash.io", CACHE_TOKEN: "tok-from-env-123" });
    expect(fromEnv.cache?.token).toBe("tok-from-env-123");
    expect(fromEnv.secretValues).toContain("tok-from-env-123");
    const fromSetting = load(
      { CACHE_URL: "https://x.upstash.io", CACHE_TOKEN: "tok-from-env-123" },
      { "ConnectionStrings:CacheToken": "tok-from-setting-456" },
    );
    expect(fromSetting.cache?.token).toBe("tok-from-setting-456");
    expect(fromSetting.secretValues).toContain("tok-from-setting-456");
  });

  test("Production: redis:// and https:// with a token pass; http:// and a token-less https:// do not", () => {
    expect(cacheProblems({ CACHE_URL: "redis://cache:6379" })).toEqual([]);
    expect(cacheProblems({ CACHE_URL: "https://:tok@x.upstash.io" })).toEqual([]);
    expect(cacheProblems({ CACHE_URL: "https://x.upstash.io", CACHE_TOKEN: "tok" })).toEqual([]);
    expect(cacheProblems({ CACHE_URL: "http://:tok@127.0.0.1:8080" })).toEqual([
      { key: "CACHE_URL", problem: "must be a redis://, rediss:// or https:// URL" },
    ]);
    expect(cacheProblems({ CACHE_URL: "https://x.upstash.io" })).toEqual([
      { key: "ConnectionStrings:CacheToken", problem: "is required (or CACHE_TOKEN) for an https:// cache" },
    ]);
    expect(cacheProblems({})).toEqual([
      { key: "ConnectionStrings:Cache", problem: "is required (or CACHE_URL) in Production" },
    ]);
  });
});
