/**
 * `bun run bench:cold-start`: `npm run dev`'s server (`bun src/server.ts --migrate --embedded`, what
 * it runs after setup) started in a fresh folder, as a new user meets it. Prints, per start, the time
 * from spawn to the first 200 of /api/health/ready, the process's peak resident memory (VmHWM) at
 * that moment and its resident memory (VmRSS) `--steady` seconds later (default 60).
 *
 * Starts: `first` (no ./.data/dev; the migrated template setup made), `second` (./.data/dev exists),
 * and with `--no-template` also `first, no template` (initdb and every migration in the process, as
 * before the template). Run it under `flock /tmp/plinth-bench.lock` and quote the load (`uptime`).
 */
import { existsSync, mkdtempSync, readFileSync, renameSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { templateDir } from "../src/db/pglite-template.ts";

const ROOT = resolve(import.meta.dir, "..");
const { values } = parseArgs({
  args: process.argv.slice(2),
  options: {
    steady: { type: "string", default: "60" },
    runs: { type: "string", default: "3" },
    "no-template": { type: "boolean", default: false },
  },
});
const steadySeconds = Number(values.steady);
const runs = Number(values.runs);

function memoryOf(pid: number): { peakMb: number; rssMb: number } {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+)`, "m").exec(status)?.[1] ?? 0);
  return { peakMb: kb("VmHWM") / 1024, rssMb: kb("VmRSS") / 1024 };
}

async function freePort(): Promise<number> {
  const server = Bun.serve({ port: 0, fetch: () => new Response() });
  const port = server.port ?? 0;
  server.stop(true);
  return port;
}

interface Start {
  readyMs: number;
  peakMb: number;
  steadyMb: number | null;
  migrationsApplied: number;
}

/** One start in `dir`; stops the process after measuring. */
async function start(dir: string, steady: number): Promise<Start> {
  const port = await freePort();
  const t0 = performance.now();
  const proc = Bun.spawn(["bun", join(ROOT, "src/server.ts"), "--migrate", "--embedded"], {
    cwd: dir,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", PORT: String(port) },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const output = new Response(proc.stdout).text();
  let readyMs = 0;
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`the server ended (${proc.exitCode}): ${await output}`);
    const ok = await fetch(`http://127.0.0.1:${port}/api/health/ready`)
      .then((r) => r.status === 200)
      .catch(() => false);
    if (ok) {
      readyMs = performance.now() - t0;
      break;
    }
    await Bun.sleep(25);
  }
  const { peakMb } = memoryOf(proc.pid);
  let steadyMb: number | null = null;
  if (steady > 0) {
    await Bun.sleep(steady * 1000);
    steadyMb = memoryOf(proc.pid).rssMb;
  }
  proc.kill("SIGTERM");
  await proc.exited;
  const applied = (await output)
    .split("\n")
    .filter((l) => l.includes('"msg":"migrations applied"'))
    .map((l) => (JSON.parse(l) as { applied?: string[] }).applied?.length ?? 0);
  return { readyMs, peakMb, steadyMb, migrationsApplied: applied[0] ?? 0 };
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
};

async function scenario(name: string, prepare: (dir: string) => Promise<void>, steady: number) {
  const results: Start[] = [];
  for (let i = 0; i < runs; i++) {
    const dir = mkdtempSync(join(tmpdir(), "plinth-cold-start-"));
    try {
      await prepare(dir);
      // only the last run waits for the steady figure: it is the same process state every time
      results.push(await start(dir, i === runs - 1 ? steady : 0));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  const steadyMb = results.at(-1)?.steadyMb;
  console.log(
    [
      name.padEnd(22),
      `${(median(results.map((r) => r.readyMs)) / 1000).toFixed(2).padStart(6)} s`,
      `${median(results.map((r) => r.peakMb))
        .toFixed(0)
        .padStart(6)} MB`,
      `${steadyMb == null ? "     -" : steadyMb.toFixed(0).padStart(6)} MB`,
      `${String(results[0]?.migrationsApplied ?? 0).padStart(4)}`,
      `  (${results.map((r) => (r.readyMs / 1000).toFixed(2)).join(", ")} s)`,
    ].join("  "),
  );
}

const template = templateDir();
console.log(
  `load ${readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ")}; ${runs} runs each, median; steady after ${steadySeconds} s`,
);
if (!existsSync(template)) {
  // without it "first" would measure initdb and the migrations under the wrong name
  console.error(`no template for these migrations at ${template}: run sh scripts/setup.sh first`);
  process.exit(1);
}
console.log(`template ${template}`);
console.log(
  `${"start".padEnd(22)}  ${"ready".padStart(8)}  ${"peak RSS".padStart(9)}  ${"steady".padStart(9)}  migrations applied`,
);
await scenario("first (template)", async () => {}, steadySeconds);
await scenario(
  "second (.data/dev)",
  async (dir) => {
    await start(dir, 0);
  },
  steadySeconds,
);
if (values["no-template"] && existsSync(template)) {
  const aside = `${template}.aside`;
  renameSync(template, aside);
  try {
    await scenario("first, no template", async () => {}, 0);
  } finally {
    renameSync(aside, template);
  }
}
