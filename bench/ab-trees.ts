/**
 * `/api/auth/me` of several checkouts of Plinth, A/B in one run (how issue #31's regression was
 * bisected, docs/performance.md):
 *
 *   bun bench/ab-trees.ts [--rounds 5] [--seconds 3] [--path /api/auth/me] <checkout>...
 *
 * A checkout is a `git worktree add --detach DIR <commit>` with node_modules (a link to one is
 * enough); `DIR::Section__Key=value,…` serves it with those settings too (the same tree twice with a
 * setting on and off: an A/B of one feature). Each tree's app runs in its own process (`bench/ab-serve.ts`, copied into the tree), beside
 * a bare `Bun.serve` process; wrk -t1 -c64 loads them in turn, round after round, so the machine's
 * load hits all alike. Per server: the median requests/s and ratio to the bare server of the same
 * round, and its CPU per request from /proc/<pid>/stat (all of its threads: JIT and GC included),
 * median and least of the rounds (other load only ever adds to a round's figure).
 */
import { copyFileSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { median } from "./stats.ts";

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    rounds: { type: "string", default: "5" },
    seconds: { type: "string", default: "3" },
    path: { type: "string", default: "/api/auth/me" },
  },
});
const ROUNDS = Number(values.rounds);
const SECONDS = Number(values.seconds);
/** Linux reports process CPU in clock ticks of 10 ms. */
const TICK_US = 10_000;

/** User + system CPU of a process and all its threads, in clock ticks. */
function cpuTicks(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return Number(fields[11]) + Number(fields[12]);
}

interface Served {
  name: string;
  proc: Bun.Subprocess<"ignore", "pipe", "inherit">;
  url: string;
  headers: Record<string, string>;
}

/** Starts `cmd` and waits for its `READY <port> <token>` line. */
async function start(
  name: string,
  cmd: string[],
  cwd: string,
  path: string,
  settings: Record<string, string> = {},
): Promise<Served> {
  const env = { ...process.env, AB_SETTINGS: JSON.stringify(settings) };
  const proc = Bun.spawn(cmd, { cwd, env, stdout: "pipe", stderr: "inherit" });
  const reader = proc.stdout.getReader();
  let text = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`${name} exited before it was ready: ${text}`);
    text += new TextDecoder().decode(value);
    const ready = /READY (\d+) (\S+)\n/.exec(text);
    if (ready) {
      reader.releaseLock();
      const headers: Record<string, string> = ready[2] === "-" ? {} : { authorization: `Bearer ${ready[2]}` };
      return { name, proc, url: `http://127.0.0.1:${ready[1]}${path}`, headers };
    }
  }
}

const servers: Served[] = [
  await start(
    "bare Bun.serve",
    [
      "bun",
      "-e",
      'const s = Bun.serve({ port: 0, fetch: () => new Response("ok") }); console.log("READY " + s.port + " -");',
    ],
    process.cwd(),
    "/",
  ),
];
for (const served of positionals) {
  const [tree = "", extra = ""] = served.split("::");
  const settings = Object.fromEntries(
    extra
      .split(",")
      .filter(Boolean)
      .map((pair) => pair.split("=") as [string, string]),
  );
  const serveFile = join(resolve(tree), "bench", "ab-serve.ts");
  if (serveFile !== join(import.meta.dir, "ab-serve.ts"))
    copyFileSync(join(import.meta.dir, "ab-serve.ts"), serveFile);
  servers.push(await start(served, ["bun", "bench/ab-serve.ts"], tree, values.path, settings));
}

async function wrk(server: Served, seconds: number): Promise<{ rps: number; cpuUs: number }> {
  const args = ["wrk", "-t1", "-c64", `-d${seconds}s`];
  for (const [name, value] of Object.entries(server.headers)) args.push("-H", `${name}: ${value}`);
  const before = cpuTicks(server.proc.pid);
  const proc = Bun.spawn([...args, server.url], { stdout: "pipe", stderr: "pipe" });
  const out = await new Response(proc.stdout).text();
  await proc.exited;
  const ticks = cpuTicks(server.proc.pid) - before;
  const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1]);
  const non2xx = /Non-2xx or 3xx responses:\s+(\d+)/.exec(out)?.[1];
  if (!rps || non2xx) throw new Error(`wrk against ${server.name}: ${out}`);
  return { rps, cpuUs: (ticks * TICK_US) / (rps * seconds) };
}

for (const server of servers) await wrk(server, 2); // warm-up
const rps = servers.map(() => [] as number[]);
const ratio = servers.map(() => [] as number[]);
const cpu = servers.map(() => [] as number[]);
for (let round = 0; round < ROUNDS; round++) {
  const row: string[] = [];
  for (const [i, server] of servers.entries()) {
    const run = await wrk(server, SECONDS);
    rps[i]?.push(run.rps);
    cpu[i]?.push(run.cpuUs);
    ratio[i]?.push(run.rps / (rps[0]?.[round] ?? run.rps));
    row.push(`${Math.round(run.rps)} (${run.cpuUs.toFixed(0)} µs)`);
  }
  process.stderr.write(`round ${round + 1}/${ROUNDS}: ${row.join("  ")}\n`);
}
for (const server of servers) server.proc.kill("SIGTERM");
await Promise.all(servers.map((server) => server.proc.exited));

const load = readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
console.log(
  `\nGET ${values.path}, wrk -t1 -c64, ${ROUNDS} interleaved rounds of ${SECONDS} s (${new Date().toISOString()}, load average ${load})\n`,
);
console.log("| server | req/s (median) | × bare (median) | CPU µs/request (median) | (least) |");
console.log("| --- | ---: | ---: | ---: | ---: |");
for (const [i, server] of servers.entries())
  console.log(
    `| ${server.name} | ${Math.round(median(rps[i] ?? [])).toLocaleString("en")} | ${median(ratio[i] ?? []).toFixed(2)} | ${median(cpu[i] ?? []).toFixed(1)} | ${Math.min(...(cpu[i] ?? [])).toFixed(1)} |`,
  );
process.exit(0);
