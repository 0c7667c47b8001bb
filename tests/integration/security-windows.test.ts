import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { ManualClock } from "../../src/clock.ts";
import { type Database, execute } from "../../src/db/client.ts";
import type { Deps } from "../../src/deps.ts";
import { memoryCounterStore } from "../../src/security/counter-store.ts";
import { windowKey } from "../../src/security/windows.ts";
import { startUpstashBridge, type UpstashBridge } from "../fixtures/upstash-bridge.ts";
import { testConfig, testDeps, useTestDatabase } from "../helpers/app.ts";
import { REDIS_URL, rawRedis, SINGLE_REDIS_URL, uniquePrefix } from "../helpers/cache.ts";
import { openTestDatabase } from "../helpers/database.ts";

const settings = {
  "Authentication:Password:AttemptLimit": "3",
  "Authentication:Password:AttemptWindowSeconds": "60",
  "Authentication:Password:IpAttemptLimit": "5",
  "Authentication:Password:AccountAttemptLimit": "4",
  "Authentication:Password:AccountMaxDelaySeconds": "8",
  "Authentication:Sms:SendLimit": "2",
  "Authentication:Sms:SendWindowSeconds": "120",
  "Authentication:Sms:IpSendLimit": "10",
};

let bridge: UpstashBridge;
// the topology's Redis (a cluster when scaled), and the single node the Upstash bridge stands on
const raw = rawRedis();
const single = REDIS_URL === SINGLE_REDIS_URL ? raw : rawRedis(SINGLE_REDIS_URL);
const prefixes: string[] = [];
const extraDatabases: Database[] = [];

afterAll(async () => {
  for (const prefix of prefixes) await Promise.all([raw.cleanup(prefix), single.cleanup(prefix)]);
  raw.close();
  if (single !== raw) single.close();
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
  const second = await openTestDatabase(t.url, { poolSize: 2 });
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
    expect(refused).toEqual({
      allowed: false,
      retryAfterSeconds: 60,
      refusedBy: { name: "password-address", limit: 3, windowSeconds: 60 },
    });

    clock.advance(30_000);
    expect(await a.windows.check("password", { account, ip })).toMatchObject({
      allowed: false,
      retryAfterSeconds: 30,
    });
    clock.advance(30_000);
    expect((await a.windows.consume("password", { account, ip })).allowed).toBe(true);
  });

  test("the window slides: access comes back attempt by attempt", async () => {
    const subjects = { account: `${store}-slide@example.com`, ip: "198.51.100.2" };
    await a.windows.consume("password", subjects);
    clock.advance(20_000);
    await a.windows.consume("password", subjects);
    await a.windows.consume("password", subjects);
    expect((await a.windows.check("password", subjects)).retryAfterSeconds).toBe(40);
    clock.advance(40_000);
    expect((await a.windows.consume("password", subjects)).allowed).toBe(true);
    expect((await a.windows.consume("password", subjects)).allowed).toBe(false);
  });

  test("attempts stamped by a clock since put back count as made now: refused for the window, not until the clock catches up", async () => {
    const start = clock.now();
    const stepped = { account: `${store}-stepped@example.com`, ip: "198.51.100.9" };
    const skewed = { account: `${store}-skewed@example.com`, ip: "198.51.100.10" };
    clock.advance(11 * 60_000);
    for (let i = 0; i < 3; i++) expect((await a.windows.consume("password", stepped)).allowed).toBe(true);
    // a few seconds ahead (another instance's clock): kept as stamped
    clock.set(start.getTime() + 5_000);
    for (let i = 0; i < 3; i++) expect((await b.windows.consume("password", skewed)).allowed).toBe(true);
    clock.set(start);
    expect(await a.windows.consume("password", stepped)).toEqual({
      allowed: false,
      retryAfterSeconds: 60,
      refusedBy: { name: "password-address", limit: 3, windowSeconds: 60 },
    });
    expect((await a.windows.check("password", skewed)).retryAfterSeconds).toBe(65);
    clock.advance(60_000);
    expect((await a.windows.consume("password", stepped)).allowed).toBe(true);
    expect((await a.windows.check("password", skewed)).retryAfterSeconds).toBe(5);
  });

  test("two app instances share the counters", async () => {
    const account = { account: `${store}-shared@example.com`, ip: "198.51.100.3" };
    expect((await a.windows.consume("password", account)).allowed).toBe(true);
    expect((await b.windows.consume("password", account)).allowed).toBe(true);
    expect((await a.windows.consume("password", account)).allowed).toBe(true);
    expect((await b.windows.consume("password", account)).allowed).toBe(false);
    await b.windows.reset("password", account);
    expect((await a.windows.consume("password", account)).allowed).toBe(true);
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
    const ip = "198.51.100.4";
    const results = await Promise.all(
      Array.from({ length: 12 }, (_, i) => (i % 2 ? a : b).windows.consume("password", { account, ip })),
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
    // the account window was not touched by refunding the IP's: it holds r0's first attempt, so
    // three more reach AccountAttemptLimit (4) and the next is slowed
    const account = `${store}-r0@example.com`;
    for (let i = 0; i < 3; i++) expect((await a.windows.consume("password", { account })).allowed).toBe(true);
    expect((await a.windows.consume("password", { account })).refusedBy?.name).toBe("password-account");
    // a refund of an attempt that was never recorded changes nothing
    await a.windows.refund("password", { ip }, 1);
    expect((await a.windows.check("password", { ip })).allowed).toBe(false);
    // a refused consume records nothing, so it carries nothing to refund
    expect((await a.windows.consume("password", { ip })).recordedAtMs).toBeUndefined();
  });

  test("one address hammering an account is refused there; other addresses are not", async () => {
    const account = `${store}-owner@example.com`;
    const attacker = { account, ip: "203.0.113.10" };
    for (let i = 0; i < 3; i++) expect((await a.windows.consume("password", attacker)).allowed).toBe(true);
    const refused = await b.windows.consume("password", attacker);
    expect(refused.refusedBy?.name).toBe("password-address");
    // the owner, from elsewhere, is counted on the account (3 of 4) but not refused
    const owner = { account, ip: "192.0.2.20" };
    expect((await b.windows.consume("password", owner)).allowed).toBe(true);
    await b.windows.reset("password", owner);
    // the owner's success cleared the account-wide count and the owner's address, not the attacker's
    expect((await a.windows.consume("password", attacker)).refusedBy?.name).toBe("password-address");
    expect((await a.windows.consume("password", { account, ip: "192.0.2.21" })).allowed).toBe(true);
  });

  test("across addresses the account is slowed with a doubling delay, capped, never locked", async () => {
    const account = `${store}-spread@example.com`;
    let n = 0;
    const from = () => ({ account, ip: `198.18.0.${++n}` });
    for (let i = 0; i < 4; i++) expect((await a.windows.consume("password", from())).allowed).toBe(true);
    const waits: number[] = [];
    for (let round = 0; round < 6; round++) {
      const refused = await (round % 2 ? a : b).windows.consume("password", from());
      expect(refused.allowed).toBe(false);
      expect(refused.refusedBy).toEqual({ name: "password-account", limit: 4, windowSeconds: 60 });
      waits.push(refused.retryAfterSeconds);
      clock.advance(refused.retryAfterSeconds * 1000);
      expect((await a.windows.consume("password", from())).allowed).toBe(true);
    }
    // 1 s, 2 s, 4 s, then AccountMaxDelaySeconds (8 s)
    expect(waits).toEqual([1, 2, 4, 8, 8, 8]);
    // a success clears it
    await a.windows.reset("password", { account });
    expect((await b.windows.consume("password", from())).allowed).toBe(true);
  });

  test("SMS send windows count per phone with their own limits", async () => {
    const phone = `+1555${store.length}000111`;
    expect((await a.windows.consume("smsSend", { phone, ip: "192.0.2.50" })).allowed).toBe(true);
    expect((await b.windows.consume("smsSend", { phone, ip: "192.0.2.51" })).allowed).toBe(true);
    expect(await a.windows.consume("smsSend", { phone, ip: "192.0.2.52" })).toEqual({
      allowed: false,
      retryAfterSeconds: 120,
      refusedBy: { name: "sms-send-phone", limit: 2, windowSeconds: 120 },
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
      const stored = store === "upstash" ? single : raw;
      const keys = await stored.keys(prefix);
      expect(keys).toContain(`${prefix}${accountKey}`);
      // one window, one hash tag: its slot on a Redis Cluster
      expect(keys).toContain(`${prefix}win:password:ip:{192.0.2.99}`);
      expect(keys.every((key) => key.startsWith(prefix))).toBe(true);
      expect(await stored.client.pttl(`${prefix}${accountKey}`)).toBeGreaterThan(0);
    }
  });
});
