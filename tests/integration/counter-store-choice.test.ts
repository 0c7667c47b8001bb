import { afterAll, beforeAll, expect, test } from "bun:test";
import { type Database, openDatabase } from "../../src/db/client.ts";
import { statusOf } from "../../src/http/problem-json.ts";
import { testConfig, testDeps, useTestDatabase } from "../helpers/app.ts";
import { REDIS_URL } from "../helpers/cache.ts";

let pglite: Database;
afterAll(async () => {
  await pglite.close();
});
const t = useTestDatabase();
beforeAll(async () => {
  pglite = await openDatabase("pglite:memory:");
});

test("a configured cache is always the store, even in Development and even while unreachable", async () => {
  const up = await testDeps(testConfig({ cacheUrl: REDIS_URL }), { database: t.database });
  expect(up.counters.kind).toBe("cache");
  const down = await testDeps(testConfig({ cacheUrl: "redis://127.0.0.1:1" }), {
    database: t.database,
    waitForCache: false,
  });
  expect(down.counters.kind).toBe("cache");
  await expect(down.windows.consume("password", { account: "a@example.com" })).rejects.toMatchObject({
    code: "unavailable",
    retryAfterSeconds: 5,
  });
  // the status now comes from the code, at the HTTP edge
  expect(statusOf.unavailable).toBe(503);
  await up.cache?.close();
  await down.cache?.close();
});

test("without a cache: PostgreSQL keeps the counters; embedded PGlite keeps them in process", async () => {
  expect((await testDeps(testConfig(), { database: t.database })).counters.kind).toBe("database");
  expect((await testDeps(testConfig(), { database: pglite })).counters.kind).toBe("memory");
});
