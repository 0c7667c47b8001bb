/**
 * HTTP throughput of Plinth beside a bare `Bun.serve` hello-world, same machine, same run:
 *
 *   bun run bench:http [--rounds 5] [--seconds 5] [--connections 64]
 *
 * Four servers, loaded in turn over loopback with `wrk -t1 -c<connections>` (Debian:
 * apt-get install -y wrk):
 *   1. bare Bun.serve returning "ok";
 *   2. a one-route Hono app (the framework's own share);
 *   3. Plinth `GET /api/health` as server.ts serves it: request id, log line, security headers,
 *      on Bun's own router in front of the app (`nativeLiveness`; the probes sit in front of the
 *      host check and the rate limits);
 *   4. Plinth `GET /api/auth/me` with a bearer token through the app's middleware (host check,
 *      global rate limit on Redis, signature check, session check, identity).
 * Needs PostgreSQL on 127.0.0.1:5432 and Redis on 127.0.0.1:6379. Log lines go to /dev/null
 * (they are still built and written). Prints requests/s and the ratio to the bare server.
 */
import { parseArgs } from "node:util";
import { eq } from "drizzle-orm";
import { Hono } from "hono";
import { createApp } from "../src/app.ts";
import { users } from "../src/db/schema/index.ts";
import { closeDeps } from "../src/deps.ts";
import { bunServeOptions } from "../src/http/bun-serve.ts";
import { createPlatformAdmin, PASSWORD } from "../tests/helpers/identity.ts";
import { benchDeps } from "./plinth-process.ts";
import { median } from "./stats.ts";

const { values } = parseArgs({
  options: {
    seconds: { type: "string", default: "5" },
    connections: { type: "string", default: "64" },
    rounds: { type: "string", default: "5" },
  },
});
const SECONDS = Number(values.seconds);
const CONNECTIONS = Number(values.connections);
const ROUNDS = Number(values.rounds);

async function wrk(url: string, headers: Record<string, string> = {}, seconds = SECONDS): Promise<number> {
  const args = ["wrk", "-t1", `-c${CONNECTIONS}`, `-d${seconds}s`];
  for (const [name, value] of Object.entries(headers)) args.push("-H", `${name}: ${value}`);
  const proc = Bun.spawn([...args, url], { stdout: "pipe", stderr: "pipe" });
  const out = await new Response(proc.stdout).text();
  await proc.exited;
  const rps = /Requests\/sec:\s+([\d.]+)/.exec(out)?.[1];
  const non2xx = /Non-2xx or 3xx responses:\s+(\d+)/.exec(out)?.[1];
  if (!rps) throw new Error(`wrk printed no figure:\n${out}`);
  if (non2xx) throw new Error(`${non2xx} responses were not 2xx for ${url}`);
  return Number(rps);
}

interface Target {
  name: string;
  url: string;
  headers?: Record<string, string>;
}
const targets: Target[] = [];
const servers: { stop(closeActiveConnections?: boolean): Promise<void> }[] = [];

// 1. bare Bun.serve
{
  const server = Bun.serve({ port: 0, fetch: () => new Response("ok") });
  servers.push(server);
  targets.push({ name: "bare Bun.serve hello-world", url: `http://127.0.0.1:${server.port}/` });
}

// 2. the framework alone: a one-route Hono app, to separate Hono's cost from Plinth's
{
  const hono = new Hono();
  hono.get("/api/health", (c) => c.json({ status: "pass" }));
  const server = Bun.serve({ port: 0, fetch: hono.fetch });
  servers.push(server);
  targets.push({ name: "one-route Hono app (reference)", url: `http://127.0.0.1:${server.port}/api/health` });
}

// 3 and 4: Plinth, served as server.ts serves it
const { deps, database: t } = await benchDeps("http");
const admin = await createPlatformAdmin(deps.database.db);
await deps.database.db.update(users).set({ mustChangePassword: false }).where(eq(users.id, admin.id));
const app = createApp(deps);
const server = Bun.serve({ port: 0, ...bunServeOptions(app, deps) });
servers.push(server);
const base = `http://127.0.0.1:${server.port}`;
const login = await fetch(`${base}/api/auth/login`, {
  method: "POST",
  headers: { "content-type": "application/json" },
  body: JSON.stringify({ email: admin.email, password: PASSWORD }),
});
const { accessToken } = (await login.json()) as { accessToken: string };
targets.push({ name: "Plinth GET /api/health (full stack)", url: `${base}/api/health` });
targets.push({
  name: "Plinth GET /api/auth/me (bearer)",
  url: `${base}/api/auth/me`,
  headers: { authorization: `Bearer ${accessToken}` },
});

// Interleaved rounds: each round loads every server once, in turn, so a change in the machine's
// load (this is a shared 2-core box) hits all of them alike; the table gives medians.
for (const target of targets) await wrk(target.url, target.headers, 2); // warm-up
const samples = targets.map(() => [] as number[]);
const ratios = targets.map(() => [] as number[]);
for (let round = 0; round < ROUNDS; round++) {
  const rps: number[] = [];
  for (const [i, target] of targets.entries()) {
    rps[i] = await wrk(target.url, target.headers);
    samples[i]?.push(rps[i] as number);
  }
  for (const [i] of targets.entries()) ratios[i]?.push((rps[i] as number) / (rps[0] as number));
  process.stderr.write(`round ${round + 1}/${ROUNDS}: ${rps.map((r) => Math.round(r)).join(" ")}\n`);
}

for (const s of servers) await s.stop(true);
await closeDeps(deps);
await t.drop();

console.log(
  `\nwrk -t1 -c${CONNECTIONS}, ${ROUNDS} interleaved rounds of ${SECONDS} s per server (${new Date().toISOString()})\n`,
);
console.log("| server | req/s (median) | × bare (median of rounds) | × bare (range) |");
console.log("| --- | ---: | ---: | ---: |");
for (const [i, target] of targets.entries()) {
  const r = ratios[i] ?? [];
  console.log(
    `| ${target.name} | ${Math.round(median(samples[i] ?? [])).toLocaleString("en")} | ${median(r).toFixed(2)} | ${Math.min(...r).toFixed(2)}–${Math.max(...r).toFixed(2)} |`,
  );
}
