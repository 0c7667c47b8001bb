/**
 * Added latency of rate limiting: the same trivial route with and without the rate-limit middleware,
 * same process, same run, driven through `app.fetch` (no sockets, so the figure is the middleware's
 * own cost plus its store round trip). Stores: Redis (ioredis, 127.0.0.1:6379), Upstash REST (the
 * test bridge in front of the same Redis), the in-process store (embedded PGlite) and the database
 * store (Development without a cache, PostgreSQL).
 *
 *   bun run bench:rate-limit [--requests 4000] [--concurrency 32] [--wrk] [--wrk-seconds 5]
 *
 * With --wrk (needs `wrk`, Debian: apt-get install -y wrk) each variant is also served with
 * Bun.serve and loaded over loopback with `wrk -t1 -c64`, printed as a second table.
 *
 * Needs Redis on 127.0.0.1:6379 and PostgreSQL on 127.0.0.1:5432 (a scratch database is created
 * and dropped). Prints one table; copy it into docs/performance.md.
 */
import { parseArgs } from "node:util";
import { Redis } from "ioredis";
import { createCache } from "../src/cache/index.ts";
import { systemClock } from "../src/clock.ts";
import { bunPeer } from "../src/http/client-ip.ts";
import { rateLimit } from "../src/http/middleware/rate-limit.ts";
import { createRouter } from "../src/http/request-context.ts";
import {
  type CounterStore,
  cacheCounterStore,
  databaseCounterStore,
  memoryCounterStore,
} from "../src/security/counter-store.ts";
import { startUpstashBridge } from "../tests/fixtures/upstash-bridge.ts";
import { silentLogger } from "../tests/helpers/cache.ts";
import { createTestDatabase } from "../tests/helpers/database.ts";

const { values } = parseArgs({
  options: {
    requests: { type: "string", default: "4000" },
    concurrency: { type: "string", default: "32" },
    wrk: { type: "boolean", default: false },
    "wrk-seconds": { type: "string", default: "5" },
  },
});
const REQUESTS = Number(values.requests);
const CONCURRENCY = Number(values.concurrency);
const PREFIX = `plinth:bench-${process.pid}:`;

function buildApp(store: CounterStore | null) {
  const app = createRouter();
  if (store)
    app.use(
      rateLimit(
        { name: "global", limit: 1_000_000_000, windowSeconds: 60, onUnavailable: "closed" },
        { store, clock: systemClock, logger: silentLogger },
      ),
    );
  app.get("/bench", (c) => c.json({ ok: true }));
  return app;
}

type Fetcher = ReturnType<typeof buildApp>;

const request = (app: Fetcher, i: number) =>
  app.fetch(new Request("http://bench.local/bench"), { peerAddress: `10.${(i >> 8) & 255}.${i & 255}.1` });

async function sequential(app: Fetcher): Promise<number[]> {
  const samples: number[] = [];
  for (let i = 0; i < REQUESTS; i++) {
    const started = performance.now();
    const res = await request(app, i % 1000);
    await res.arrayBuffer();
    samples.push(performance.now() - started);
    if (res.status !== 200) throw new Error(`unexpected status ${res.status}`);
  }
  return samples.sort((a, b) => a - b);
}

async function concurrent(app: Fetcher): Promise<number> {
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < REQUESTS) {
        const i = next++;
        const res = await request(app, i % 1000);
        await res.arrayBuffer();
      }
    }),
  );
  return REQUESTS / ((performance.now() - started) / 1000);
}

/** Serves the app on a random port and loads it with wrk; returns [req/s, p50 ms, p99 ms]. */
async function wrk(app: Fetcher): Promise<[number, number, number]> {
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch: (req, srv) => app.fetch(req, bunPeer(srv, req)),
  });
  try {
    const url = `http://127.0.0.1:${server.port}/bench`;
    const run = (seconds: string) =>
      Bun.spawn(["wrk", "-t1", "-c64", `-d${seconds}s`, "--latency", url], { stdout: "pipe" });
    await run("1").exited; // warm-up
    const child = run(values["wrk-seconds"]);
    const out = await new Response(child.stdout).text();
    await child.exited;
    const toMs = (text: string | undefined) => {
      const m = /([\d.]+)(us|ms|s)/.exec(text ?? "");
      if (!m) return Number.NaN;
      const v = Number(m[1]);
      return m[2] === "us" ? v / 1000 : m[2] === "s" ? v * 1000 : v;
    };
    const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1] ?? Number.NaN);
    return [rps, toMs(/\s50%\s+(\S+)/.exec(out)?.[1]), toMs(/\s99%\s+(\S+)/.exec(out)?.[1])];
  } finally {
    await server.stop(true);
  }
}

const pct = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? 0;
const ms = (value: number) => value.toFixed(3);

async function measure(name: string, app: Fetcher, baseline?: number) {
  await sequential(app); // warm-up (JIT, connections, scripts loaded)
  const samples = await sequential(app);
  const rps = await concurrent(app);
  const p50 = pct(samples, 0.5);
  return {
    name,
    p50,
    row: `| ${name} | ${ms(p50)} | ${ms(pct(samples, 0.95))} | ${ms(pct(samples, 0.99))} | ${
      baseline === undefined ? "—" : `+${ms(p50 - baseline)}`
    } | ${Math.round(rps).toLocaleString("en-US")} |`,
  };
}

const database = await createTestDatabase();
const redis = createCache("redis://127.0.0.1:6379", {
  environment: "Development",
  logger: silentLogger,
  prefix: PREFIX,
});
await redis.waitReady(3_000);
const bridge = await startUpstashBridge();
const upstash = createCache(bridge.url, {
  environment: "Development",
  logger: silentLogger,
  prefix: PREFIX,
  token: bridge.token,
});

try {
  const base = await measure("no rate limit (baseline)", buildApp(null));
  const rows = [base.row];
  rows.push((await measure("rate limit, Redis (ioredis)", buildApp(cacheCounterStore(redis)), base.p50)).row);
  rows.push(
    (await measure("rate limit, Upstash REST (local bridge)", buildApp(cacheCounterStore(upstash)), base.p50))
      .row,
  );
  rows.push(
    (await measure("rate limit, in-process store (PGlite dev)", buildApp(memoryCounterStore()), base.p50))
      .row,
  );
  rows.push(
    (
      await measure(
        "rate limit, database store (dev)",
        buildApp(databaseCounterStore(database.database.db)),
        base.p50,
      )
    ).row,
  );
  console.log(
    `app.fetch, ${REQUESTS} sequential requests per row (after a warm-up pass), then ${REQUESTS} at concurrency ${CONCURRENCY}; Bun ${Bun.version}\n`,
  );
  console.log("| variant | p50 ms | p95 ms | p99 ms | added p50 ms | req/s at concurrency |");
  console.log("| --- | ---: | ---: | ---: | ---: | ---: |");
  for (const row of rows) console.log(row);

  if (values.wrk) {
    console.log(
      `\nServed with Bun.serve, wrk -t1 -c64 -d${values["wrk-seconds"]}s over loopback (one client IP, limit never reached)\n`,
    );
    console.log("| variant | req/s | p50 ms | p99 ms |");
    console.log("| --- | ---: | ---: | ---: |");
    const variants: [string, Fetcher][] = [
      ["no rate limit (baseline)", buildApp(null)],
      ["rate limit, Redis (ioredis)", buildApp(cacheCounterStore(redis))],
      ["rate limit, in-process store (PGlite dev)", buildApp(memoryCounterStore())],
    ];
    for (const [name, app] of variants) {
      const [rps, p50, p99] = await wrk(app);
      console.log(
        `| ${name} | ${Math.round(rps).toLocaleString("en-US")} | ${p50.toFixed(3)} | ${p99.toFixed(3)} |`,
      );
    }
  }
} finally {
  const raw = new Redis("redis://127.0.0.1:6379");
  let cursor = "0";
  do {
    const [nextCursor, keys] = await raw.scan(cursor, "MATCH", `${PREFIX}*`, "COUNT", 1000);
    cursor = nextCursor;
    if (keys.length > 0) await raw.del(...keys);
  } while (cursor !== "0");
  raw.disconnect();
  await redis.close();
  await upstash.close();
  await bridge.stop();
  await database.drop();
}
