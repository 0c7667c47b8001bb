import { tracked } from "./children.ts";
import { cleanEnv, collectOutput, ROOT } from "./process.ts";

/** `bun src/server.ts` as its own process, its stdout JSON lines collected as they come. */
export interface ApiProcess {
  proc: Bun.Subprocess<"ignore", "pipe", "pipe">;
  lines: string[];
  /** Resolves the first line that matches, waiting up to `timeoutMs`; rejects if the process ends first. */
  waitForLine(match: (line: string) => boolean, timeoutMs?: number): Promise<string>;
  /** The port from the `listening` line. */
  listening(timeoutMs?: number): Promise<number>;
  stderr(): string;
  /** SIGTERM, then the exit code. */
  stop(): Promise<number>;
}

export function startApi(env: Record<string, string | undefined>, args: string[] = []): ApiProcess {
  const proc = tracked(
    Bun.spawn(["bun", "src/server.ts", ...args], {
      cwd: ROOT,
      env: cleanEnv({ PORT: "0", ...env }),
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
    }),
  );
  const waiters = new Set<() => void>();
  let ended = false;
  const notify = () => {
    for (const waiter of waiters) waiter();
  };
  const output = collectOutput(proc, notify);
  const { lines } = output;
  void proc.exited.then(() =>
    // let the last output arrive before waiters give up
    setTimeout(() => {
      ended = true;
      notify();
    }, 100),
  );
  const waitForLine = (match: (line: string) => boolean, timeoutMs = 20_000) =>
    new Promise<string>((resolve, reject) => {
      const check = () => {
        const found = lines.find(match);
        if (found !== undefined || ended) {
          waiters.delete(check);
          clearTimeout(timer);
          if (found !== undefined) resolve(found);
          else reject(new Error(`process ended without the line:\n${lines.join("\n")}\n${output.stderr()}`));
        }
      };
      const timer = setTimeout(() => {
        waiters.delete(check);
        reject(
          new Error(`no matching line within ${timeoutMs} ms:\n${lines.join("\n")}\n${output.stderr()}`),
        );
      }, timeoutMs);
      waiters.add(check);
      check();
    });
  return {
    proc,
    lines,
    waitForLine,
    listening: async (timeoutMs) =>
      JSON.parse(await waitForLine((l) => l.includes('"msg":"listening"'), timeoutMs)).port as number,
    stderr: output.stderr,
    stop: async () => {
      proc.kill("SIGTERM");
      return proc.exited;
    },
  };
}

/** Log lines as objects (non-JSON lines are skipped). */
export function records(lines: string[]): Record<string, unknown>[] {
  return lines.flatMap((line) => {
    try {
      return [JSON.parse(line) as Record<string, unknown>];
    } catch {
      return [];
    }
  });
}
