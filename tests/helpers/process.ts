import { resolve } from "node:path";

export const ROOT = resolve(import.meta.dir, "../..");

export interface RunResult {
  exitCode: number;
  stdout: string;
  stderr: string;
}

/** Runs a Plinth entry point (`src/migrate.ts`, `src/server.ts`) as its own process. */
export async function runEntry(
  entry: string,
  args: string[],
  env: Record<string, string | undefined>,
  timeoutMs = 20_000,
): Promise<RunResult> {
  const proc = Bun.spawn(["bun", entry, ...args], {
    cwd: ROOT,
    env: cleanEnv(env),
    stdout: "pipe",
    stderr: "pipe",
  });
  const timer = setTimeout(() => proc.kill("SIGKILL"), timeoutMs);
  const [stdout, stderr, exitCode] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited,
  ]);
  clearTimeout(timer);
  return { exitCode, stdout, stderr };
}

/** Only PATH and HOME from the outer environment, so no stray setting leaks into a test. */
export function cleanEnv(env: Record<string, string | undefined>): Record<string, string> {
  const out: Record<string, string> = { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp" };
  for (const [key, value] of Object.entries(env)) if (value !== undefined) out[key] = value;
  return out;
}
