import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { type App, createApp } from "../../src/app.ts";
import type { AppConfig } from "../../src/config/load.ts";
import type { Deps } from "../../src/deps.ts";
import { MAX_VARIANTS, outputCacheFor } from "../../src/http/middleware/output-cache.ts";
import { relaxedLimits, testConfig, testDeps, useTestDatabase } from "../helpers/app.ts";
import { REDIS_URL, rawRedis, uniquePrefix } from "../helpers/cache.ts";

const raw = rawRedis();
const prefixes: string[] = [];
const opened: Deps[] = [];
afterAll(async () => {
  for (const deps of opened) await deps.cache?.close();
  for (const prefix of prefixes) await raw.cleanup(prefix);
  raw.close();
});
const t = useTestDatabase();

/** An app with opted-in routes that count how often their handler really ran. */
async function build(config: AppConfig, waitForCache = true) {
  const prefix = uniquePrefix("out");
  prefixes.push(prefix);
  const deps = await testDeps(config, { database: t.database, cachePrefix: prefix, waitForCache });
  opened.push(deps);
  const app: App = createApp(deps);
  const calls = { plans: 0, cookie: 0, missing: 0, lang: 0 };
  // stand-in for tenant resolution (built elsewhere): the output cache keys by c.get("tenant")
  app.use("/api/public/*", async (c, next) => {
    const code = c.req.header("x-test-tenant");
    if (code) c.set("tenant", { id: `id-${code}`, code });
    await next();
  });
  app.use("/api/public/*", outputCacheFor(deps, { query: ["a", "b", "q"] }));
  app.get("/api/public/plans", (c) => {
    calls.plans++;
    return c.json({
      plans: ["free", "pro"],
      tenant: c.get("tenant")?.code ?? null,
      q: c.req.query("q") ?? null,
    });
  });
  app.get("/api/public/with-cookie", (c) => {
    calls.cookie++;
    c.header("set-cookie", "session=abc; HttpOnly");
    return c.json({ ok: true });
  });
  app.get("/api/public/missing", (c) => {
    calls.missing++;
    return c.json({ code: "not_found" }, 404);
  });
  app.get("/api/public/greeting", (c) => {
    calls.lang++;
    c.header("vary", "Accept-Language");
    return c.json({ hello: c.req.header("accept-language")?.startsWith("fr") ? "bonjour" : "hello" });
  });
  return { app, deps, calls, prefix };
}

const production = () =>
  testConfig({
    cacheUrl: REDIS_URL,
    environment: "Production",
    settings: relaxedLimits,
  });

describe("output cache in Production", () => {
  let ctx: Awaited<ReturnType<typeof build>>;
  beforeAll(async () => {
    const config = production();
    ctx = await build(config);
  });

  test("an anonymous GET is served from the cache the second time", async () => {
    const first = await ctx.app.request("/api/public/plans?b=2&a=1");
    expect(first.headers.get("x-cache")).toBe("miss");
    const body = await first.json();
    const second = await ctx.app.request("/api/public/plans?a=1&b=2");
    expect(second.status).toBe(200);
    expect(second.headers.get("x-cache")).toBe("hit");
    expect(second.headers.get("content-type")).toContain("application/json");
    expect(second.headers.get("age")).not.toBeNull();
    expect(await second.json()).toEqual(body);
    expect(ctx.calls.plans).toBe(1);
    const keys = await raw.keys(`${ctx.prefix}out:`);
    expect(keys.length).toBeGreaterThan(0);
  });

  test("the query and the tenant are part of the key", async () => {
    const before = ctx.calls.plans;
    const q = (await (await ctx.app.request("/api/public/plans?q=x")).json()) as { q: string };
    expect(q.q).toBe("x");
    const acme = await ctx.app.request("/api/public/plans", { headers: { "x-test-tenant": "acme" } });
    expect(((await acme.json()) as { tenant: string }).tenant).toBe("acme");
    const globex = await ctx.app.request("/api/public/plans", { headers: { "x-test-tenant": "globex" } });
    expect(((await globex.json()) as { tenant: string }).tenant).toBe("globex");
    const acmeAgain = await ctx.app.request("/api/public/plans", { headers: { "x-test-tenant": "acme" } });
    expect(acmeAgain.headers.get("x-cache")).toBe("hit");
    expect(((await acmeAgain.json()) as { tenant: string }).tenant).toBe("acme");
    expect(ctx.calls.plans - before).toBe(3);
  });

  test("an encoded query value is not confused with several parameters", async () => {
    const encoded = await ctx.app.request("/api/public/plans?q=1%26b%3D2");
    expect(((await encoded.json()) as { q: string }).q).toBe("1&b=2");
    const split = await ctx.app.request("/api/public/plans?q=1&b=2");
    expect(split.headers.get("x-cache")).not.toBe("hit");
    expect(((await split.json()) as { q: string }).q).toBe("1");
  });

  test("requests with Authorization or Cookie bypass the cache", async () => {
    await ctx.app.request("/api/public/plans?who=me");
    const before = ctx.calls.plans;
    const authed = await ctx.app.request("/api/public/plans?who=me", {
      headers: { authorization: "Bearer x" },
    });
    expect(authed.headers.get("x-cache")).toBeNull();
    await ctx.app.request("/api/public/plans?who=me", { headers: { cookie: "session=1" } });
    expect(ctx.calls.plans - before).toBe(2);
  });

  test("responses that set a cookie or are not 200 are never stored", async () => {
    await ctx.app.request("/api/public/with-cookie");
    const again = await ctx.app.request("/api/public/with-cookie");
    expect(again.headers.get("set-cookie")).toContain("session=abc");
    expect(ctx.calls.cookie).toBe(2);
    await ctx.app.request("/api/public/missing");
    expect((await ctx.app.request("/api/public/missing")).status).toBe(404);
    expect(ctx.calls.missing).toBe(2);
  });

  test("Vary is honoured: each language gets its own entry", async () => {
    const en = async () =>
      (await (
        await ctx.app.request("/api/public/greeting", { headers: { "accept-language": "en" } })
      ).json()) as {
        hello: string;
      };
    const fr = async () =>
      (await (
        await ctx.app.request("/api/public/greeting", { headers: { "accept-language": "fr" } })
      ).json()) as {
        hello: string;
      };
    expect((await en()).hello).toBe("hello");
    expect((await fr()).hello).toBe("bonjour");
    expect((await en()).hello).toBe("hello");
    expect((await fr()).hello).toBe("bonjour");
    expect(ctx.calls.lang).toBe(2);
  });
});

describe("a bounded output cache", () => {
  let ctx: Awaited<ReturnType<typeof build>>;
  beforeAll(async () => {
    const config = production();
    ctx = await build(config);
  });

  test("made-up query parameters add no entry: only the ones a route declares are in the key", async () => {
    const keys = async () => (await raw.keys(`${ctx.prefix}out:`)).length;
    // the JWKS is not output-cached at all (its max-age and ETag do the job): made-up queries add nothing
    const beforeJwks = await keys();
    for (let n = 0; n < 20; n++)
      expect((await ctx.app.request(`/.well-known/jwks.json?cb=${n}`)).status).toBe(200);
    expect(await keys()).toBe(beforeJwks);
    for (const path of ["/api/plans", "/api/public/plans"]) {
      const first = await ctx.app.request(path);
      expect(first.status).toBe(200);
      const stored = await keys();
      for (let n = 0; n < 20; n++) {
        const busted = await ctx.app.request(`${path}?cb=${n}&tenant_=${n}`);
        expect(busted.status).toBe(200);
        expect(busted.headers.get("x-cache")).toBe("hit");
      }
      expect(await keys()).toBe(stored);
    }
    // a declared one still makes its own entry
    const before = await keys();
    await ctx.app.request("/api/public/plans?q=declared");
    expect(await keys()).toBe(before + 1);
  });

  test("made-up Vary header values add at most MAX_VARIANTS entries under one key", async () => {
    const before = (await raw.keys(`${ctx.prefix}out:`)).length;
    for (let n = 0; n < MAX_VARIANTS + 10; n++)
      await ctx.app.request("/api/public/greeting", { headers: { "accept-language": `x-${n}` } });
    const keys = await raw.keys(`${ctx.prefix}out:`);
    // the base index and its variants; the rest are served without being stored
    expect(keys.length - before).toBe(1 + MAX_VARIANTS);
    const again = await ctx.app.request("/api/public/greeting", { headers: { "accept-language": "x-1" } });
    expect(again.headers.get("x-cache")).toBe("hit");
  });
});

describe("output cache elsewhere", () => {
  test("off outside Production", async () => {
    const { app, calls } = await build(testConfig({ cacheUrl: REDIS_URL }));
    await app.request("/api/public/plans");
    await app.request("/api/public/plans");
    expect(calls.plans).toBe(2);
  });

  test("an unreachable cache serves the route itself", async () => {
    const config = production();
    const { app, calls } = await build(
      { ...config, cache: { url: "redis://127.0.0.1:1", source: "CACHE_URL" } },
      false,
    );
    expect((await app.request("/api/public/plans")).status).toBe(200);
    expect((await app.request("/api/public/plans")).status).toBe(200);
    expect(calls.plans).toBe(2);
  });
});
