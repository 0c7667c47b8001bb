import { resolve } from "node:path";
import { tracked } from "./children.ts";

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
  const proc = tracked(
    Bun.spawn(["bun", entry, ...args], {
      cwd: ROOT,
      env: cleanEnv(env),
      stdout: "pipe",
      stderr: "pipe",
    }),
  );
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

/**
 * Collects a child's stdout line by line (`onLines` after each chunk, e.g. to wake waiters) and
 * the last 20,000 characters of its stderr.
 */
export function collectOutput(
  proc: Bun.Subprocess<"ignore", "pipe", "pipe">,
  onLines: () => void,
): { lines: string[]; stderr: () => string } {
  const lines: string[] = [];
  let err = "";
  void (async () => {
    const decoder = new TextDecoder();
    let buffer = "";
    for await (const chunk of proc.stdout) {
      buffer += decoder.decode(chunk, { stream: true });
      let i = buffer.indexOf("\n");
      while (i >= 0) {
        lines.push(buffer.slice(0, i));
        buffer = buffer.slice(i + 1);
        i = buffer.indexOf("\n");
      }
      onLines();
    }
    if (buffer) lines.push(buffer);
    onLines();
  })();
  void (async () => {
    const decoder = new TextDecoder();
    for await (const chunk of proc.stderr)
      err = (err + decoder.decode(chunk, { stream: true })).slice(-20_000);
  })();
  return { lines, stderr: () => err };
}
