import { afterAll, beforeAll, expect } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { useTestDatabase } from "./app.ts";
import { tracked } from "./children.ts";
import { appRoleEnv, type TestDatabase } from "./database.ts";
import { cleanEnv, ROOT } from "./process.ts";
import { type OwnRedis, ownRedisServer } from "./redis-server.ts";

/**
 * What a key-rotation runbook test needs: a key folder `keys:generate --host api.example.test`
 * made, a migrated database and a Redis of the file's own; commands run with production.env loaded
 * as the runbooks say (`set -a; . DIR/production.env; set +a`).
 */
export interface KeyFolder {
  /** The key folder (the runbooks' `/etc/plinth/keys`). */
  readonly dir: string;
  readonly t: TestDatabase;
  /** Runs `command` with production.env loaded; exit code and stdout + stderr. */
  run(command: string): { code: number | null; out: string };
  /** production.env's variables (the key files' paths, not their content). */
  env(): Record<string, string>;
  /** A Production API from production.env ("every replica restarted with the settings"): ready, then stopped. */
  restartApi(): Promise<void>;
  /** The ```sh blocks of a page's section, in order, with this folder for `/etc/plinth/keys`. */
  runbookCommands(page: string, heading: string): string[];
}

export function useKeyFolder(): KeyFolder {
  const root = mkdtempSync(join(tmpdir(), "plinth-key-folder-"));
  const dir = join(root, "keys");
  const t = useTestDatabase({ empty: true });
  let redis: OwnRedis | undefined;
  const loaded = (command: string) => [
    "sh",
    "-c",
    `set -a; . ${dir}/production.env; set +a; exec ${command}`,
  ];
  const connections = (extra: Record<string, string> = {}) =>
    cleanEnv({ DATABASE_URL: t.url, CACHE_URL: redis?.url, ...extra });
  const folder: KeyFolder = {
    dir,
    t,
    run(command) {
      const proc = Bun.spawnSync(loaded(command), {
        cwd: ROOT,
        env: connections(),
        stdout: "pipe",
        stderr: "pipe",
      });
      return { code: proc.exitCode, out: proc.stdout.toString() + proc.stderr.toString() };
    },
    env() {
      return Object.fromEntries(
        readFileSync(join(dir, "production.env"), "utf8")
          .split("\n")
          .filter((l) => l.includes("=") && !l.startsWith("#"))
          .map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)]),
      );
    },
    async restartApi() {
      const proc = tracked(
        Bun.spawn(loaded("bun run start"), {
          cwd: ROOT,
          // the API as its role, which the migrator made and granted (Production refuses the owner)
          env: connections({ ...appRoleEnv(t.url), PORT: "0" }),
          stdout: "pipe",
          stderr: "pipe",
        }),
      );
      const decoder = new TextDecoder();
      let buffer = "";
      for await (const chunk of proc.stdout) {
        buffer += decoder.decode(chunk, { stream: true });
        if (buffer.includes('"msg":"listening"')) break;
      }
      expect(buffer).toContain('"msg":"listening"');
      proc.kill("SIGTERM");
      expect(await proc.exited).toBe(0);
    },
    runbookCommands(page, heading) {
      const text = readFileSync(join(ROOT, page), "utf8");
      const start = text.indexOf(heading);
      if (start < 0) throw new Error(`${page} has no ${heading}`);
      const end = text.slice(start + heading.length).search(/\n#{2,3} /);
      const section = text.slice(start, end < 0 ? undefined : start + heading.length + end);
      return [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) =>
        (m[1] ?? "").trim().replaceAll("/etc/plinth/keys", dir),
      );
    },
  };
  beforeAll(async () => {
    redis = await ownRedisServer();
    const generated = Bun.spawnSync(
      ["bun", "run", "keys:generate", "--out", dir, "--host", "api.example.test"],
      { cwd: ROOT },
    );
    expect(generated.exitCode).toBe(0);
    expect(folder.run("bun run migrate").code).toBe(0);
  }, 60_000);
  afterAll(async () => {
    await redis?.stop();
    rmSync(root, { recursive: true, force: true });
  });
  return folder;
}
