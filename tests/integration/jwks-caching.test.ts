import { afterAll, expect, test } from "bun:test";
import { createApp } from "../../src/app.ts";
import { testConfig, testDeps, useTestDatabase } from "../helpers/app.ts";
import { REDIS_URL, rawRedis, uniquePrefix } from "../helpers/cache.ts";
import { rsaKeys } from "../helpers/production-env.ts";

/**
 * Issue #15, point 10: the JWKS answer changes as soon as the key set does. Two processes share
 * one Redis with the output cache on (as in Production); the one started with the new key set
 * publishes it at once, and clients may keep a set for at most `max-age=60`, revalidating by ETag.
 */
const k1 = rsaKeys();
const k2 = rsaKeys();
const prefix = uniquePrefix("jwks");
const t = useTestDatabase();
afterAll(async () => {
  const redis = rawRedis();
  await redis.cleanup(prefix);
  redis.close();
});

async function processWith(kids: ("k1" | "k2")[]) {
  const keys = { k1, k2 };
  const current = kids.at(-1) ?? "k1";
  const settings: Record<string, string> = {
    "Security:Jwt:CurrentKeyId": current,
    "Security:Jwt:PrivateKey": keys[current].privateKeyPem,
    "Cache:OutputCacheEnabled": "true",
  };
  kids.forEach((kid, i) => {
    settings[`Security:Jwt:VerificationKeys:${i}:KeyId`] = kid;
    settings[`Security:Jwt:VerificationKeys:${i}:PublicKey`] = keys[kid].publicKeyPem;
  });
  const deps = await testDeps(testConfig({ settings, cacheUrl: REDIS_URL }), {
    database: t.database,
    cachePrefix: prefix,
  });
  const app = createApp(deps);
  return {
    get: (headers: Record<string, string> = {}) =>
      app.fetch(new Request("http://localhost/.well-known/jwks.json", { headers }), {
        peerAddress: "127.0.0.1",
      }),
    close: () => deps.cache?.close(),
  };
}

const kidsOf = async (response: Response) =>
  ((await response.json()) as { keys: { kid: string }[] }).keys.map((k) => k.kid).sort();

test("a process with a new key set publishes it at once; max-age 60 and an ETag of the set", async () => {
  const before = await processWith(["k1"]);
  const after = await processWith(["k1", "k2"]);
  try {
    const old = await before.get();
    expect(await kidsOf(old)).toEqual(["k1"]);
    expect(old.headers.get("cache-control")).toBe("public, max-age=60");
    const oldTag = old.headers.get("etag");
    expect(oldTag).toMatch(/^"[\w-]+"$/);
    expect((await before.get()).headers.get("x-cache")).toBeNull(); // never from the shared output cache

    const rotated = await after.get();
    expect(await kidsOf(rotated)).toEqual(["k1", "k2"]);
    expect(rotated.headers.get("etag")).not.toBe(oldTag);

    // revalidation: the same set answers 304, a changed one the new set
    const unchanged = await before.get({ "if-none-match": oldTag ?? "" });
    expect(unchanged.status).toBe(304);
    const changed = await after.get({ "if-none-match": oldTag ?? "" });
    expect(changed.status).toBe(200);
    expect(await kidsOf(changed)).toEqual(["k1", "k2"]);
  } finally {
    await before.close();
    await after.close();
  }
});
