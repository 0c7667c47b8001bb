/**
 * HTTP throughput of Plinth beside bare Bun, same machine, same run:
 *
 *   bun run bench:http [--rounds 5] [--seconds 5] [--connections 64] [--stages]
 *
 * Seven servers, loaded in turn over loopback with `wrk -t1 -c<connections>` (Debian:
 * apt-get install -y wrk), each measured against its own peer:
 *   1. bare Bun.serve returning "ok" (the peer of 3 and 4);
 *   2. a one-route Hono app (the framework's own share);
 *   3. Plinth `GET /api/health` as server.ts serves it: request id, log line, security headers,
 *      on Bun's own router in front of the app (`nativeLiveness`);
 *   4. Plinth `GET /api/auth/me` with a bearer token through the app's middleware (host check,
 *      global rate limit on Redis, signature check, session check, identity);
 *   5. bare Bun.serve running the page query of 6 with postgres.js (same SQL, same pool size) and
 *      answering its JSON (the peer of 6);
 *   6. Plinth `GET /api/tenant/users?limit=20` with a tenant owner's bearer token (a database read
 *      behind authentication);
 *   7. the same with a tenant API key (`plk_…`, scope `users:read`; its own rate-limit bucket; the
 *      peer is 6).
 * Each round loads every server once (interleaved, so the machine's load hits all alike); the table
 * gives the median requests/s, the median of each round's ratio to the peer's figure of the same
 * round, and the server's own CPU per request, median and least of the rounds (this process's `cpuUsage` over the run: wrk,
 * PostgreSQL and Redis are not in it), which other load on a shared machine moves less.
 *
 * `--stages` (alone with `--rounds 0`): where a `/api/auth/me` request's time goes, in process (no
 * network): the same request through a one-route app that gains Plinth's middleware one stage at a
 * time, CPU µs per request for each (64 requests in flight, 11 interleaved rounds, the least of
 * them: load from other processes only adds); the difference between two lines is the stage's
 * cost. Then the part in-process stages cannot show, over HTTP, every server sent /me's request
 * (its ~800-byte Authorization included): Bun.serve answering /me's exact bytes, the same reading
 * the socket peer, then the URL and headers the fast lane reads, then its request id, RateLimit
 * value and log line, and Plinth's /me (`httpStages`), so the in-process figure plus the serving
 * cost accounts for the over-HTTP one, and any rest is printed.
 *
 * Needs PostgreSQL on 127.0.0.1:5432 and Redis on 127.0.0.1:6379. Log lines go to /dev/null through
 * the server's own buffered sink (built and written, not printed). docs/performance.md keeps the
 * figures; rerun after every change to the authenticated path.
 */
import { parseArgs } from "node:util";
import { Hono, type MiddlewareHandler } from "hono";
import postgres from "postgres";
import { createApp } from "../src/app.ts";
import { closeDeps, type Deps } from "../src/deps.ts";
import { bunServeOptions } from "../src/http/bun-serve.ts";
import { authenticate } from "../src/http/middleware/authenticate.ts";
import { rateLimit, rateLimitPolicies } from "../src/http/middleware/rate-limit.ts";
import { chainMiddleware, guardRequest, requestIdLogHeaders } from "../src/http/middleware/request.ts";
import { resolveTenancy } from "../src/http/middleware/tenancy.ts";
import { type AppEnv, createRouter } from "../src/http/request-context.ts";
import { createTenant, createUser, PASSWORD, readyPlatformUser } from "../tests/helpers/identity.ts";
import { benchDeps } from "./plinth-process.ts";
import { median } from "./stats.ts";

const { values } = parseArgs({
  options: {
    seconds: { type: "string", default: "5" },
    connections: { type: "string", default: "64" },
    rounds: { type: "string", default: "5" },
    stages: { type: "boolean", default: false },
  },
});
const SECONDS = Number(values.seconds);
const CONNECTIONS = Number(values.connections);
const ROUNDS = Number(values.rounds);

/** Requests/s of one wrk run, and this process's CPU per request (µs) over it. */
async function wrk(
  url: string,
  headers: Record<string, string> = {},
  seconds = SECONDS,
): Promise<{ rps: number; cpuUs: number }> {
  const args = ["wrk", "-t1", `-c${CONNECTIONS}`, `-d${seconds}s`];
  for (const [name, value] of Object.entries(headers)) args.push("-H", `${name}: ${value}`);
  const cpu = process.cpuUsage();
  const proc = Bun.spawn([...args, url], { stdout: "pipe", stderr: "pipe" });
  const out = await new Response(proc.stdout).text();
  await proc.exited;
  const used = process.cpuUsage(cpu);
  const rps = /Requests\/sec:\s+([\d.]+)/.exec(out)?.[1];
  const non2xx = /Non-2xx or 3xx responses:\s+(\d+)/.exec(out)?.[1];
  if (!rps) throw new Error(`wrk printed no figure:\n${out}`);
  if (non2xx) throw new Error(`${non2xx} responses were not 2xx for ${url}`);
  return { rps: Number(rps), cpuUs: (used.user + used.system) / (Number(rps) * seconds) };
}

interface Target {
  name: string;
  url: string;
  headers?: Record<string, string>;
  /** The index of the target this one is measured against, and the ratio asked of it. */
  peer?: number;
  goal?: number;
}
const targets: Target[] = [];
const servers: { stop(closeActiveConnections?: boolean): Promise<void> }[] = [];
const serve = (fetch: (req: Request) => Response | Promise<Response>) => {
  const server = Bun.serve({ port: 0, fetch });
  servers.push(server);
  return `http://127.0.0.1:${server.port}`;
};

// 1. bare Bun.serve; 2. the framework alone, to separate Hono's cost from Plinth's
const bare = serve(() => new Response("ok"));
targets.push({ name: "bare Bun.serve hello-world", url: `${bare}/` });
const hono = new Hono();
hono.get("/api/health", (c) => c.json({ status: "pass" }));
targets.push({ name: "one-route Hono app (reference)", url: `${serve(hono.fetch)}/api/health`, peer: 0 });

// Plinth, served as server.ts serves it, over a tenant with an owner and nineteen more users
const { deps, database: t } = await benchDeps("http", { RateLimiting__ApiKey__PermitLimit: "1000000000" });
const db = deps.database.db;
const admin = await readyPlatformUser(db);
const tenant = await createTenant(db);
const owner = await createUser(db, tenant.id, { role: "owner" });
for (let i = 0; i < 19; i++) await createUser(db, tenant.id);
const app = createApp(deps);
const server = Bun.serve({ port: 0, ...bunServeOptions(app, deps) });
servers.push(server);
const base = `http://127.0.0.1:${server.port}`;
const signIn = async (body: Record<string, string>) => {
  const response = await fetch(`${base}/api/auth/login`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ password: PASSWORD, ...body }),
  });
  if (response.status !== 200) throw new Error(`sign-in answered ${response.status}`);
  return ((await response.json()) as { accessToken: string }).accessToken;
};
const adminToken = await signIn({ email: admin.email });
const ownerToken = await signIn({ email: owner.email, tenant: tenant.code });
const created = await fetch(`${base}/api/tenant/api-keys`, {
  method: "POST",
  headers: { "content-type": "application/json", authorization: `Bearer ${ownerToken}` },
  body: JSON.stringify({ name: "bench", scopes: ["users:read"] }),
});
if (created.status !== 201) throw new Error(`no key: ${created.status} ${await created.text()}`);
const { key } = (await created.json()) as { key: string };

targets.push({ name: "Plinth GET /api/health (full stack)", url: `${base}/api/health`, peer: 0, goal: 0.85 });
targets.push({
  name: "Plinth GET /api/auth/me (bearer)",
  url: `${base}/api/auth/me`,
  headers: { authorization: `Bearer ${adminToken}` },
  peer: 0,
  goal: 0.5,
});

// 5. the page of 6 with nothing around it: postgres.js and bare Bun.serve, the same pool size
const sql = postgres(t.url, { max: deps.config.settings.Database.PoolSize, onnotice: () => {} });
const page = serve(async () => {
  const rows = await sql`
    select u.id, u.email, u.name, u.phone, u.status, m.role, u.must_change_password, u.created_at,
           u.created_at::text as position
    from users u
    left join tenant_memberships m on m.user_id = u.id and m.tenant_id = ${tenant.id}
    where u.tenant_id = ${tenant.id}
    order by u.created_at, u.id
    limit 21`;
  const items = rows.slice(0, 20).map(({ position: _position, ...row }) => row);
  return Response.json({ items, nextCursor: rows.length > 20 ? "next" : null });
});
const bareQuery = targets.push({ name: "bare Bun.serve + postgres.js, the same page", url: `${page}/` }) - 1;
const usersUrl = `${base}/api/tenant/users?limit=20`;
const bearerUsers =
  targets.push({
    name: "Plinth GET /api/tenant/users?limit=20 (bearer)",
    url: usersUrl,
    headers: { authorization: `Bearer ${ownerToken}` },
    peer: bareQuery,
    goal: 0.6,
  }) - 1;
targets.push({
  name: "Plinth GET /api/tenant/users?limit=20 (API key)",
  url: usersUrl,
  headers: { authorization: `Bearer ${key}` },
  peer: bearerUsers,
  goal: 0.9,
});

// Interleaved rounds: each round loads every server once, in turn; the table gives medians.
if (ROUNDS > 0) for (const target of targets) await wrk(target.url, target.headers, 2); // warm-up
const samples = targets.map(() => [] as number[]);
const cpu = targets.map(() => [] as number[]);
const ratios = targets.map(() => [] as number[]);
for (let round = 0; round < ROUNDS; round++) {
  const rps: number[] = [];
  for (const [i, target] of targets.entries()) {
    const run = await wrk(target.url, target.headers);
    rps[i] = run.rps;
    samples[i]?.push(run.rps);
    cpu[i]?.push(run.cpuUs);
  }
  for (const [i, target] of targets.entries())
    if (target.peer !== undefined) ratios[i]?.push((rps[i] as number) / (rps[target.peer] as number));
  process.stderr.write(`round ${round + 1}/${ROUNDS}: ${rps.map((r) => Math.round(r)).join(" ")}\n`);
}

const stages = values.stages ? await stageCosts(deps, adminToken) : [];
const overHttp = values.stages ? await httpStages(targets[3] as Target) : [];

for (const s of servers) await s.stop(true);
await sql.end();
await closeDeps(deps);
await t.drop();

const load = (await Bun.file("/proc/loadavg").text()).split(" ").slice(0, 3).join(" ");
if (ROUNDS > 0) {
  console.log(
    `\nwrk -t1 -c${CONNECTIONS}, ${ROUNDS} interleaved rounds of ${SECONDS} s per server (${new Date().toISOString()}, load average ${load})\n`,
  );
  console.log(
    "| server | req/s (median) | ÷ peer (median of rounds) | ÷ peer (range) | goal | server CPU µs/req (median) | (least) |",
  );
  console.log("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
  for (const [i, target] of targets.entries()) {
    const r = ratios[i] ?? [];
    const ratio = target.peer === undefined ? "—" : `${median(r).toFixed(2)} (÷ ${target.peer + 1})`;
    const range = r.length ? `${Math.min(...r).toFixed(2)}–${Math.max(...r).toFixed(2)}` : "—";
    console.log(
      `| ${i + 1}. ${target.name} | ${Math.round(median(samples[i] ?? [])).toLocaleString("en")} | ${ratio} | ${range} | ${target.goal ? `≥ ${target.goal}` : ""} | ${median(cpu[i] ?? []).toFixed(1)} | ${Math.min(...(cpu[i] ?? [])).toFixed(1)} |`,
    );
  }
}
if (stages.length) {
  console.log(
    "\nWhere /api/auth/me's time goes (in process, CPU µs per request, least of 11 interleaved rounds):\n",
  );
  console.log("| stack | µs/request | this stage |");
  console.log("| --- | ---: | ---: |");
  let previous = 0;
  for (const { name, us } of stages) {
    console.log(`| ${name} | ${us.toFixed(2)} | ${(us - previous).toFixed(2)} |`);
    previous = us;
  }
}
if (overHttp.length) {
  const inProcess = (stages.at(-1)?.us ?? 0) - (stages[0]?.us ?? 0);
  console.log(
    "\nThe same request over HTTP (wrk -t1, this process's CPU per request, least of 5 interleaved rounds of 2 s):\n",
  );
  console.log("| server | µs/request | this stage |");
  console.log("| --- | ---: | ---: |");
  let previous = 0;
  for (const { name, us } of overHttp) {
    console.log(`| ${name} | ${us.toFixed(2)} | ${previous ? (us - previous).toFixed(2) : ""} |`);
    previous = us;
  }
  const answered = overHttp[2]?.us ?? 0;
  const me = overHttp.at(-1)?.us ?? 0;
  const line = overHttp.at(-2)?.us ?? 0;
  console.log(
    `\n/me over HTTP ${me.toFixed(1)} µs = served answer with its peer read ${answered.toFixed(1)} + the app in process ${inProcess.toFixed(1)} (whole app − bare Response) + ${(me - answered - inProcess).toFixed(1)} not in any stage.`,
  );
  console.log(
    `What the fast lane decides (token, session, memberships, host, the limit's lease, the body) costs ${(me - line).toFixed(1)} µs over HTTP on top of its reads and its request line.`,
  );
}
process.exit(0);

/**
 * The in-process stage profile: a one-route app that gains Plinth's middleware one stage at a
 * time, in app.ts's order, then the whole app; each variant serves the same `/api/auth/me` request
 * 64 at a time, interleaved rounds, CPU µs per request (the least round).
 */
async function stageCosts(deps: Deps, token: string): Promise<{ name: string; us: number }[]> {
  type Fetch = (req: Request, env: { peerAddress: string }) => Response | Promise<Response>;
  const settings = deps.config.settings;
  const policies = rateLimitPolicies(settings, deps.config.environment);
  const limiter = { store: deps.counters, clock: deps.clock, logger: deps.logger };
  const failed = (error: Error) => {
    throw error;
  };
  // the checks run inside the request line's step, as app.ts mounts them (no probe is asked for)
  const edge = (...checks: MiddlewareHandler<AppEnv>[]) =>
    requestIdLogHeaders({
      logger: deps.logger,
      trustedProxies: settings.Tenancy.Resolution.TrustedProxies,
      ...(checks.length > 0
        ? { checks: { run: chainMiddleware(...checks), exempt: new Set<string>(), onError: failed } }
        : {}),
    });
  const stack = (depth: number): Fetch => {
    const app = createRouter();
    const checks: MiddlewareHandler<AppEnv>[] = [];
    if (depth >= 2) checks.push(rateLimit(policies.global, limiter));
    if (depth >= 3)
      checks.push(resolveTenancy({ settings, environment: deps.config.environment, lookup: deps.tenants }));
    if (depth >= 1) app.use(edge(...checks));
    if (depth >= 4) {
      app.use(guardRequest(settings.Server.MaxBodyBytes));
    }
    if (depth >= 5) app.use("/api/auth/me", authenticate(deps));
    app.get("/api/auth/me", (c) => c.json({ ok: true }));
    return app.fetch as Fetch;
  };
  const oneRoute = new Hono();
  oneRoute.get("/api/auth/me", (c) => c.json({ ok: true }));
  const variants: [string, Fetch][] = [
    ["bare `new Response`", () => new Response("ok")],
    ["one-route Hono app", oneRoute.fetch as Fetch],
    ["+ request id, log line, security headers", stack(1)],
    ["+ global rate limit (Redis, leases)", stack(2)],
    ["+ host check, tenant resolution", stack(3)],
    ["+ body limit, JSON depth, input guard, no-store", stack(4)],
    ["+ authenticate (token, session, identity)", stack(5)],
    ["the whole app: + routing, guard, /me's handler", app.fetch as Fetch],
  ];
  const headers = { authorization: `Bearer ${token}`, host: "127.0.0.1" };
  const env = { peerAddress: "127.0.0.1" };
  const run = async (fetch: Fetch, requests: number) => {
    const started = process.cpuUsage();
    for (let n = 0; n < requests; n += 64) {
      const inFlight: Promise<string>[] = [];
      for (let i = 0; i < 64; i++)
        inFlight.push(
          Promise.resolve(fetch(new Request("http://127.0.0.1/api/auth/me", { headers }), env)).then((r) => {
            if (r.status !== 200) throw new Error(`a stage answered ${r.status}`);
            return r.text();
          }),
        );
      await Promise.all(inFlight);
    }
    const used = process.cpuUsage(started);
    return (used.user + used.system) / requests;
  };
  for (const [, fetch] of variants) await run(fetch, 5_000); // warm-up
  const costs = variants.map(() => [] as number[]);
  for (let round = 0; round < 11; round++)
    for (const [i, [, fetch]] of variants.entries()) costs[i]?.push(await run(fetch, 10_048));
  // the least of the rounds: other work on the machine only ever adds to a round's figure
  return variants.map(([name], i) => ({ name, us: Math.min(...(costs[i] ?? [])) }));
}

/**
 * Over HTTP, what serving costs besides the app: Bun.serve answering the very bytes `/api/auth/me`
 * answers (its headers and body, fixed), then the same reading the socket peer
 * (`server.requestIP`, as `bunServeOptions` does for every request), then Plinth itself; each
 * loaded by wrk in turn, this process's CPU per request, the least of 5 rounds.
 */
async function httpStages(me: Target): Promise<{ name: string; us: number }[]> {
  const sample = await fetch(me.url, { headers: me.headers });
  const body = await sample.text();
  const headers = [...sample.headers].filter(([name]) => name !== "date" && name !== "content-length");
  const prepared = new Headers(headers);
  const ms = () => performance.now();
  // the reads the fast lane makes of every request before it decides (src/http/fast-lane.ts)
  const read = (req: Request) =>
    req.url.includes("?") ||
    req.headers.get("authorization") === null ||
    req.headers.has("x-tenant") ||
    req.headers.has("content-length") ||
    req.headers.has("transfer-encoding") ||
    req.headers.get("x-request-id") !== null ||
    req.headers.get("host") === null;
  const variant = (fetch: (req: Request, server: Bun.Server<undefined>) => Response) => {
    const s = Bun.serve({ port: 0, fetch });
    servers.push(s);
    return `http://127.0.0.1:${s.port}/`;
  };
  const answer = variant(() => new Response(body, { headers: prepared }));
  const withPeer = variant((req, server) => {
    server.requestIP(req);
    return new Response(body, { headers: prepared });
  });
  const withReads = variant((req, server) => {
    server.requestIP(req);
    if (read(req)) throw new Error("not /me's request");
    return new Response(body, { headers: prepared });
  });
  // the request id, the RateLimit value and the log line, through the server's own logger and sink
  const withLine = variant((req, server) => {
    const started = ms();
    server.requestIP(req);
    if (read(req)) throw new Error("not /me's request");
    const requestId = crypto.randomUUID();
    prepared.set("x-request-id", requestId);
    prepared.set("ratelimit", '"global";r=999;t=1');
    const response = new Response(body, { headers: prepared });
    deps.logger.request({
      method: "GET",
      path: "/api/auth/me",
      status: 200,
      durationMs: ms() - started,
      requestId,
    });
    return response;
  });
  // every server gets /me's request, Authorization included (~800 bytes): the same bytes to read
  const variants: [string, string][] = [
    ['bare Bun.serve answering "ok"', `${bare}/`],
    ["Bun.serve answering /me's bytes (its headers and body)", answer],
    ["+ the socket peer (server.requestIP)", withPeer],
    ["+ the URL and the headers the fast lane reads", withReads],
    ["+ request id, RateLimit value, log line (the server's logger)", withLine],
    ["Plinth GET /api/auth/me (bunServeOptions)", me.url],
  ];
  const costs = variants.map(() => [] as number[]);
  for (let round = 0; round < 5; round++)
    for (const [i, [, url]] of variants.entries())
      costs[i]?.push((await wrk(url, me.headers ?? {}, 2)).cpuUs);
  return variants.map(([name], i) => ({ name, us: Math.min(...(costs[i] ?? [])) }));
}
