import { afterAll, describe, expect, test } from "bun:test";
import { ManualClock } from "../../src/clock.ts";
import type { Deps } from "../../src/deps.ts";
import { testConfig, testDeps, useTestDatabase } from "../helpers/app.ts";
import { REDIS_URL, rawRedis } from "../helpers/cache.ts";

// Two installs of one environment on one Redis, told apart by Cache:KeyPrefix alone.
const settings = {
  "Authentication:Password:AttemptLimit": "2",
  "Authentication:Password:AttemptWindowSeconds": "60",
};
const run = crypto.randomUUID().slice(0, 8);
const prefixA = `plinth:acme-${run}`;
const prefixB = `plinth:globex-${run}`;
const raw = rawRedis();
const opened: Deps[] = [];
const t = useTestDatabase();

afterAll(async () => {
  for (const deps of opened) await deps.cache?.close();
  await raw.cleanup(`${prefixA}:`);
  await raw.cleanup(`${prefixB}:`);
  raw.close();
});

async function install(keyPrefix: string | undefined, clock: ManualClock): Promise<Deps> {
  const config = testConfig({
    settings: keyPrefix ? { ...settings, "Cache:KeyPrefix": keyPrefix } : settings,
    cacheUrl: REDIS_URL,
  });
  const deps = await testDeps(config, { database: t.database, clock });
  opened.push(deps);
  return deps;
}

describe("Cache:KeyPrefix", () => {
  test("the default is plinth:<environment>", async () => {
    const deps = await install(undefined, new ManualClock("2026-11-26T10:00:00Z"));
    expect(deps.cache?.prefix).toBe("plinth:development:");
  });

  test("two installs on one Redis keep their own security windows", async () => {
    const clock = new ManualClock("2026-11-26T10:00:00Z");
    const a = await install(prefixA, clock);
    const b = await install(prefixB, clock);
    const sameA = await install(prefixA, clock);
    expect(a.cache?.prefix).toBe(`${prefixA}:`);
    expect(b.cache?.prefix).toBe(`${prefixB}:`);

    const subjects = { account: "alice@example.com", ip: "198.51.100.7" };
    expect((await a.windows.consume("password", subjects)).allowed).toBe(true);
    expect((await a.windows.consume("password", subjects)).allowed).toBe(true);
    expect((await a.windows.consume("password", subjects)).allowed).toBe(false);

    // the other install never saw those attempts: same account, same address, a full window
    expect((await b.windows.check("password", subjects)).allowed).toBe(true);
    expect((await b.windows.consume("password", subjects)).allowed).toBe(true);
    expect((await b.windows.consume("password", subjects)).allowed).toBe(true);
    expect((await b.windows.consume("password", subjects)).allowed).toBe(false);
    // a reset in one install leaves the other refused
    await b.windows.reset("password", subjects);
    expect((await b.windows.consume("password", subjects)).allowed).toBe(true);
    expect((await a.windows.check("password", subjects)).allowed).toBe(false);
    // a second process of the same install shares its windows
    expect((await sameA.windows.check("password", subjects)).allowed).toBe(false);

    const keysA = await raw.keys(`${prefixA}:`);
    const keysB = await raw.keys(`${prefixB}:`);
    expect(keysA.length).toBeGreaterThan(0);
    expect(keysB.length).toBeGreaterThan(0);
    expect(keysA.every((key) => key.startsWith(`${prefixA}:win:`))).toBe(true);
    expect(keysB.every((key) => key.startsWith(`${prefixB}:win:`))).toBe(true);
  });

  test("a prefix with characters outside the allowed set is refused at start", () => {
    expect(() => testConfig({ settings: { "Cache:KeyPrefix": "plinth:{bad}" } })).toThrow(/KeyPrefix/);
  });
});
