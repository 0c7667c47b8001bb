import { afterEach, describe, expect, spyOn, test } from "bun:test";
import { createTokenService, VERIFIED_TOKENS_MAX } from "../../src/auth/tokens.ts";
import { VerifiedTokens } from "../../src/auth/verified-tokens.ts";
import { ManualClock } from "../../src/clock.ts";
import { testConfig } from "../helpers/app.ts";
import { silentLogger as logger } from "../helpers/cache.ts";
import { runEntry } from "../helpers/process.ts";
import { rsaKeys } from "../helpers/production-env.ts";
import { claims } from "../helpers/token-claims.ts";

const keys = rsaKeys();
const config = testConfig({
  settings: {
    "Security:Jwt:CurrentKeyId": "k1",
    "Security:Jwt:PrivateKey": keys.privateKeyPem,
    "Security:Jwt:AccessTokenMinutes": "15",
  },
});

let verifySpy: ReturnType<typeof spyOn> | undefined;
afterEach(() => verifySpy?.mockRestore());

describe("the verified-token cache of the token service", () => {
  test("the signature is checked once per token; exp is checked on every request", async () => {
    const clock = new ManualClock("2026-11-26T10:00:00Z");
    const tokens = await createTokenService(config, clock, logger);
    const a = await tokens.issueAccessToken(claims(1));
    const b = await tokens.issueAccessToken(claims(2));
    // counts the real WebCrypto checks (the spy calls through)
    verifySpy = spyOn(crypto.subtle, "verify");
    for (let i = 0; i < 50; i++) {
      expect((await tokens.verifyAccessToken(a)).userId).toBe("user-1");
      expect((await tokens.verifyAccessToken(b)).userId).toBe("user-2");
    }
    expect(verifySpy).toHaveBeenCalledTimes(2);
    // past exp and the clock tolerance, the remembered token is refused like any other
    clock.advance((15 * 60 + 31) * 1000);
    await expect(tokens.verifyAccessToken(a)).rejects.toThrow();
  });

  test("a changed payload around a remembered signature is not a hit and is refused", async () => {
    const clock = new ManualClock("2026-11-26T10:00:00Z");
    const tokens = await createTokenService(config, clock, logger);
    const token = await tokens.issueAccessToken(claims(3));
    await tokens.verifyAccessToken(token);
    const [header, payload, signature] = token.split(".");
    const forged = JSON.parse(Buffer.from(payload ?? "", "base64url").toString());
    forged.proles = ["platform_admin", "platform_owner"];
    forged.sub = "someone-else";
    const tampered = `${header}.${Buffer.from(JSON.stringify(forged)).toString("base64url")}.${signature}`;
    await expect(tokens.verifyAccessToken(tampered)).rejects.toThrow();
    // the genuine token is still remembered
    expect((await tokens.verifyAccessToken(token)).userId).toBe("user-3");
  });
});

describe("VerifiedTokens", () => {
  // measured in a process of its own (tests/fixtures/verified-tokens-rss.ts): this process's resident
  // set also moves with the other test files' allocations and the garbage they leave behind
  const measure = async (max: number) => {
    const run = await runEntry("tests/fixtures/verified-tokens-rss.ts", [String(max)], {}, 60_000);
    if (run.exitCode !== 0)
      throw new Error(`verified-tokens-rss.ts exited ${run.exitCode}: ${run.stderr.slice(-2_000)}`);
    return JSON.parse(run.stdout) as { after20k: number; after100k: number; size: number };
  };

  test("is bounded: 100,000 distinct tokens keep resident memory flat", async () => {
    const { after20k, after100k, size } = await measure(VERIFIED_TOKENS_MAX);
    expect(size).toBeLessThanOrEqual(VERIFIED_TOKENS_MAX);
    // 80,000 more tokens through a full cache: the resident set does not grow with them
    // (each token is ~1 KB, so an unbounded cache would have grown by ~90 MB)
    expect(after100k - after20k).toBeLessThan(16 * 1024 * 1024);
  });

  test("the same measure sees an unbounded cache grow", async () => {
    // a bound above the 100,000 tokens: what the cache would be without one
    const { after20k, after100k, size } = await measure(1_000_000);
    expect(size).toBe(100_000);
    expect(after100k - after20k).toBeGreaterThan(16 * 1024 * 1024);
  });

  test("a full cache drops the tokens not used for longest; a hit needs the same token", () => {
    const cache = new VerifiedTokens<number>(4);
    cache.set("h.p1.s1", 1, 100);
    cache.set("h.p2.s2", 2, 100);
    cache.set("h.p3.s3", 3, 100); // the first two become the old generation
    expect(cache.get("h.p1.s1", 0)).toBe(1); // used: back in the young one
    cache.set("h.p4.s4", 4, 100); // the young one (3, 1) ages; 2 was not used and is gone
    expect(cache.get("h.p2.s2", 0)).toBeUndefined();
    expect(cache.get("h.p1.s1", 0)).toBe(1);
    expect(cache.get("h.p3.s3", 0)).toBe(3);
    expect(cache.get("h.p4.s4", 0)).toBe(4);
    expect(cache.size).toBeLessThanOrEqual(4);
    // the same signature under another header or payload is another token
    expect(cache.get("h.pX.s3", 0)).toBeUndefined();
    // exp is checked on every hit
    expect(cache.get("h.p3.s3", 100)).toBeUndefined();
  });
});
