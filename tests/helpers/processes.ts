import type { Subprocess } from "bun";
import { tracked } from "./children.ts";
import { collectOutput } from "./process.ts";

/** A child `bun` process whose stdout lines can be awaited. */
export interface Child {
  proc: Subprocess<"ignore", "pipe", "pipe">;
  lines: string[];
  waitForLine(match: (line: string) => boolean, timeoutMs?: number): Promise<string>;
  stderr(): string;
}

export function spawnBun(args: string[], env: Record<string, string>): Child {
  const proc = tracked(
    Bun.spawn(["bun", ...args], {
      env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", ...env },
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
    }),
  );
  const waiters = new Set<() => void>();
  const output = collectOutput(proc, () => {
    for (const w of waiters) w();
  });
  const { lines } = output;
  return {
    proc,
    lines,
    stderr: output.stderr,
    waitForLine(match, timeoutMs = 15_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const found = lines.find(match);
          if (found !== undefined) {
            waiters.delete(check);
            clearTimeout(timer);
            resolve(found);
          }
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(
            new Error(`no matching line within ${timeoutMs} ms; stderr: ${output.stderr().slice(-2_000)}`),
          );
        }, timeoutMs);
        waiters.add(check);
        check();
        void proc.exited.then(() => setTimeout(check, 50));
      });
    },
  };
}
