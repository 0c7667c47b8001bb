import { describe, expect, test } from "bun:test";
import { SessionCache } from "../../src/auth/session-cache.ts";
import { ManualClock } from "../../src/clock.ts";

// What /api/auth/me's memberships rely on (issue #31): a user's state read once per TTL, once per burst.

const cacheWith = (ttlMs = 5_000) => {
  const clock = new ManualClock("2026-11-27T04:00:00Z");
  return { clock, cache: new SessionCache({ ttlMs, clock }) };
};

/** A load that counts its calls; each read answers (`read <n>`) when `release` is called. */
function gatedLoad(tenantIds: string[]) {
  let calls = 0;
  const waiting: (() => void)[] = [];
  const load = () => {
    const n = ++calls;
    return new Promise<{ value: string; tenantIds: string[] }>((resolve) => {
      waiting.push(() => resolve({ value: `read ${n}`, tenantIds }));
    });
  };
  const release = () => {
    for (const answer of waiting.splice(0)) answer();
  };
  return { load, release, calls: () => calls };
}

describe("SessionCache.user", () => {
  test("a burst of one user's requests on a miss shares one read; later ones are answered from memory", async () => {
    const { cache } = cacheWith();
    const gate = gatedLoad(["t1"]);
    const burst = Array.from({ length: 64 }, () => cache.user("u1", gate.load));
    gate.release();
    expect(new Set(await Promise.all(burst))).toEqual(new Set(["read 1"]));
    expect(await cache.user("u1", gate.load)).toBe("read 1");
    expect(gate.calls()).toBe(1);
  });

  test("a change heard while the state was read: that read is answered, not remembered", async () => {
    const { cache } = cacheWith();
    const gate = gatedLoad(["t1"]);
    const before = cache.user("u1", gate.load);
    cache.evict({ userId: "u1" });
    gate.release();
    expect(await before).toBe("read 1");
    const after = cache.user("u1", gate.load);
    expect(gate.calls()).toBe(2);
    gate.release();
    expect(await after).toBe("read 2");
    expect(await cache.user("u1", gate.load)).toBe("read 2");
  });

  test("a request after a change does not wait on the read begun before it", async () => {
    const { cache } = cacheWith();
    const gate = gatedLoad(["t1"]);
    const before = cache.user("u1", gate.load);
    cache.evict({ tenantId: "t9" });
    const after = cache.user("u1", gate.load);
    expect(gate.calls()).toBe(2);
    gate.release();
    expect([await before, await after]).toEqual(["read 1", "read 2"]);
  });

  test("evicted by the user, by a tenant in its list, and after the TTL; other users stay", async () => {
    const { cache, clock } = cacheWith(5_000);
    let reads = 0;
    const load = (tenantIds: string[]) => async () => ({ value: ++reads, tenantIds });
    const read = (userId: string, tenantIds: string[]) => cache.user(userId, load(tenantIds));
    expect(await read("a", ["t1", "t2"])).toBe(1);
    expect(await read("b", ["t3"])).toBe(2);
    cache.evict({ tenantId: "t2" });
    expect(await read("a", ["t1"])).toBe(3);
    expect(await read("b", ["t3"])).toBe(2);
    cache.evict({ userId: "b" });
    expect(await read("b", ["t3"])).toBe(4);
    cache.evict({ sessionId: "s1" });
    expect(await read("b", ["t3"])).toBe(4);
    clock.advance(5_000);
    expect(await read("b", ["t3"])).toBe(5);
  });

  test("a user's state and a session remembered while the clock read an hour ahead are read again once it is put back", async () => {
    const { cache, clock } = cacheWith(5_000);
    const start = clock.nowMs();
    clock.advance(3_600_000);
    let reads = 0;
    const load = async () => ({ value: ++reads, tenantIds: ["t1"] });
    const session = {
      sessionId: "s1",
      userId: "u1",
      tenantId: "t1",
      expiresAt: new Date(start + 86_400_000),
    };
    expect(await cache.user("u1", load)).toBe(1);
    cache.set("s:s1", { ...session, value: "open" });
    expect(cache.rememberedUser("u1")).toBe(1);
    // within a step of CLOCK_STEP_BACK_MS (a host's skew) both stay
    clock.advance(-4_000);
    expect(cache.rememberedUser("u1")).toBe(1);
    expect(cache.get("s:s1")?.value).toBe("open");
    clock.set(start);
    expect(cache.rememberedUser("u1")).toBeUndefined();
    expect(cache.get("s:s1")).toBeUndefined();
    expect(await cache.user("u1", load)).toBe(2);
    expect(await cache.user("u1", load)).toBe(2);
  });

  test("remembers nothing with a TTL of 0 (Authentication:SessionCacheSeconds = 0)", async () => {
    const { cache } = cacheWith(0);
    let reads = 0;
    const load = async () => ({ value: ++reads, tenantIds: [] });
    expect(await cache.user("a", load)).toBe(1);
    expect(await cache.user("a", load)).toBe(2);
  });
});
