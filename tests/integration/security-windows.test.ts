import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { ManualClock } from "../../src/clock.ts";
import { type Database, execute, openDatabase } from "../../src/db/client.ts";
import type { Deps } from "../../src/deps.ts";
import { memoryCounterStore } from "../../src/security/counter-store.ts";
import { windowKey } from "../../src/security/windows.ts";
import { startUpstashBridge, type UpstashBridge } from "../fixtures/upstash-bridge.ts";
import { testConfig, testDeps, useTestDatabase } from "../helpers/app.ts";
import { REDIS_URL, rawRedis, uniquePrefix } from "../helpers/cache.ts";

const settings = {
  "Authentication:Password:AttemptLimit": "3",
  "Authentication:Password:AttemptWindowSeconds": "60",
  "Authentication:Password:IpAttemptLimit": "5",
  "Authentication:Sms:SendLimit": "2",
  "Authentication:Sms:SendWindowSeconds": "120",
  "Authentication:Sms:IpSendLimit": "10",
};

let bridge: UpstashBridge;
const raw = rawRedis();
const prefixes: string[] = [];
const extraDatabases: Database[] = [];

afterAll(async () => {
  for (const prefix of prefixes) await raw.cleanup(prefix);
  raw.close();
  await bridge.stop();
  for (const database of extraDatabases) await database.close();
});
const t = useTestDatabase();
beforeAll(async () => {
  bridge = await startUpstashBridge();
});

type Store = "redis" | "upstash" | "database" | "memory";

/** Two app instances (separate clients or database connections) sharing one store, one clock. */
async function twoInstances(store: Store, clock: ManualClock): Promise<{ a: Deps; b: Deps; prefix: string }> {
  const prefix = uniquePrefix(`win-${store}`);
  prefixes.push(prefix);
  const cacheUrl =
    store === "redis"
      ? REDIS_URL
      : store === "upstash"
        ? `${bridge.url.replace("http://", `http://:${bridge.token}@`)}`
        : null;
  const config = testConfig({ settings, cacheUrl });
  const second = await openDatabase(t.url, { poolSize: 2 });
  extraDatabases.push(second);
  // in-process counters are shared only by instances in one process: hand both the same store
  const counters = store === "memory" ? memoryCounterStore() : undefined;
  const a = await testDeps(config, { database: t.database, clock, cachePrefix: prefix, counters });
  const b = await testDeps(config, { database: second, clock, cachePrefix: prefix, counters });
  return { a, b, prefix };
}

describe.each(["redis", "upstash", "database", "memory"] as Store[])("security windows on %s", (store) => {
  let clock: ManualClock;
  let a: Deps;
  let b: Deps;
  let prefix: string;
  beforeAll(async () => {
    clock = new ManualClock("2026-11-22T10:00:00Z");
    ({ a, b, prefix } = await twoInstances(store, clock));
    expect(a.counters.kind).toBe(store === "redis" || store === "upstash" ? "cache" : store);
  });
  afterAll(async () => {
    await a.cache?.close();
    await b.cache?.close();
  });

  test("the N+1th password attempt is refused with Retry-After; the window's end restores access", async () => {
    const account = `${store}-alice@example.com`;
    const ip = "198.51.100.1";
    for (let i = 0; i < 3; i++)
      expect((await a.windows.consume("password", { account, ip })).allowed).toBe(true);
    const refused = await a.windows.consume("password", { account, ip });
    expect(refused).toEqual({ allowed: false, retryAfterSeconds: 60 });

    clock.advance(30_000);
    expect(await a.windows.check("password", { account, ip })).toEqual({
      allowed: false,
      retryAfterSeconds: 30,
    });
    clock.advance(30_000);
    expect((await a.windows.consume("password", { account, ip })).allowed).toBe(true);
  });

  test("the window slides: access comes back attempt by attempt", async () => {
    const account = `${store}-slide@example.com`;
    await a.windows.consume("password", { account });
    clock.advance(20_000);
    await a.windows.consume("password", { account });
    await a.windows.consume("password", { account });
    expect((await a.windows.check("password", { account })).retryAfterSeconds).toBe(40);
    clock.advance(40_000);
    expect((await a.windows.consume("password", { account })).allowed).toBe(true);
    expect((await a.windows.consume("password", { account })).allowed).toBe(false);
  });

  test("two app instances share the counters", async () => {
    const account = `${store}-shared@example.com`;
    expect((await a.windows.consume("password", { account })).allowed).toBe(true);
    expect((await b.windows.consume("password", { account })).allowed).toBe(true);
    expect((await a.windows.consume("password", { account })).allowed).toBe(true);
    expect((await b.windows.consume("password", { account })).allowed).toBe(false);
    await b.windows.reset("password", { account });
    expect((await a.windows.consume("password", { account })).allowed).toBe(true);
  });

  test("the per-IP window counts attempts across accounts", async () => {
    const ip = "203.0.113.77";
    for (let i = 0; i < 5; i++)
      expect(
        (await a.windows.consume("password", { account: `${store}-u${i}@example.com`, ip })).allowed,
      ).toBe(true);
    // a fresh account from the same IP: refused by the IP window alone
    expect((await b.windows.consume("password", { account: `${store}-new@example.com`, ip })).allowed).toBe(
      false,
    );
    // the same fresh account from elsewhere is fine, and was not counted by the refusal
    expect(
      (await b.windows.consume("password", { account: `${store}-new@example.com`, ip: "192.0.2.1" })).allowed,
    ).toBe(true);
  });

  test("consume is atomic: parallel attempts from two instances never overshoot the limit", async () => {
    const account = `${store}-burst@example.com`;
    const results = await Promise.all(
      Array.from({ length: 12 }, (_, i) => (i % 2 ? a : b).windows.consume("password", { account })),
    );
    expect(results.filter((r) => r.allowed)).toHaveLength(3);
  });

  test("check records nothing; hit records even when over the limit; reset clears the account only", async () => {
    const account = `${store}-hits@example.com`;
    const ip = "198.51.100.200";
    for (let i = 0; i < 5; i++)
      expect((await a.windows.check("password", { account, ip })).allowed).toBe(true);
    for (let i = 0; i < 4; i++) await a.windows.hit("password", { account, ip });
    expect((await a.windows.check("password", { account, ip })).allowed).toBe(false);
    await a.windows.reset("password", { account });
    expect((await a.windows.check("password", { account })).allowed).toBe(true);
    // the IP kept its 4 attempts: one more allowed, then refused
    expect((await a.windows.consume("password", { account: `${store}-other@example.com`, ip })).allowed).toBe(
      true,
    );
    expect((await a.windows.consume("password", { account: `${store}-third@example.com`, ip })).allowed).toBe(
      false,
    );
  });

  test("refund takes back exactly the one attempt a consume recorded, on the windows named", async () => {
    const ip = "198.51.100.150";
    const recorded: number[] = [];
    // five attempts in the same millisecond (the clock stands still): the IP window is full
    for (let i = 0; i < 5; i++) {
      const decision = await a.windows.consume("password", { account: `${store}-r${i}@example.com`, ip });
      expect(decision.allowed).toBe(true);
      recorded.push(decision.recordedAtMs ?? -1);
    }
    expect(recorded.every((at) => at === clock.now().getTime())).toBe(true);
    expect((await a.windows.check("password", { ip })).allowed).toBe(false);
    await b.windows.refund("password", { ip }, recorded[0] ?? -1);
    // one permit back, not all five
    expect((await a.windows.consume("password", { account: `${store}-r5@example.com`, ip })).allowed).toBe(
      true,
    );
    expect((await a.windows.check("password", { ip })).allowed).toBe(false);
    // the account window was not touched by refunding the IP's
    const account = `${store}-r0@example.com`;
    for (let i = 0; i < 2; i++) expect((await a.windows.consume("password", { account })).allowed).toBe(true);
    expect((await a.windows.consume("password", { account })).allowed).toBe(false);
    // a refund of an attempt that was never recorded changes nothing
    await a.windows.refund("password", { ip }, 1);
    expect((await a.windows.check("password", { ip })).allowed).toBe(false);
    // a refused consume records nothing, so it carries nothing to refund
    expect((await a.windows.consume("password", { ip })).recordedAtMs).toBeUndefined();
  });

  test("SMS send windows count per phone with their own limits", async () => {
    const phone = `+1555${store.length}000111`;
    expect((await a.windows.consume("smsSend", { phone, ip: "192.0.2.50" })).allowed).toBe(true);
    expect((await b.windows.consume("smsSend", { phone, ip: "192.0.2.51" })).allowed).toBe(true);
    expect(await a.windows.consume("smsSend", { phone, ip: "192.0.2.52" })).toEqual({
      allowed: false,
      retryAfterSeconds: 120,
    });
    // the password window of the same identifier is separate
    expect((await a.windows.consume("password", { account: phone })).allowed).toBe(true);
  });

  test("state is stored under the environment prefix, identifiers hashed", async () => {
    const account = `${store}-keys@example.com`;
    await a.windows.consume("password", { account, ip: "192.0.2.99" });
    const accountKey = windowKey("password", "account", account);
    expect(accountKey).not.toContain("example.com");
    if (store === "memory") return;
    if (store === "database") {
      const rows = await execute<{ key: string }>(
        t.database.db,
        sql`select key from security_counters where key = ${accountKey}`,
      );
      expect(rows).toHaveLength(1);
    } else {
      const keys = await raw.keys(prefix);
      expect(keys).toContain(`${prefix}${accountKey}`);
      expect(keys).toContain(`${prefix}win:password:ip:192.0.2.99`);
      expect(keys.every((key) => key.startsWith(prefix))).toBe(true);
      expect(await raw.client.pttl(`${prefix}${accountKey}`)).toBeGreaterThan(0);
    }
  });
});
