import type { Subprocess } from "bun";

/** A child `bun` process whose stdout lines can be awaited. */
export interface Child {
  proc: Subprocess<"ignore", "pipe", "pipe">;
  lines: string[];
  waitForLine(match: (line: string) => boolean, timeoutMs?: number): Promise<string>;
  stderr(): string;
}

export function spawnBun(args: string[], env: Record<string, string>): Child {
  const proc = Bun.spawn(["bun", ...args], {
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", ...env },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const lines: string[] = [];
  const waiters = new Set<() => void>();
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
      for (const w of waiters) w();
    }
  })();
  void (async () => {
    const decoder = new TextDecoder();
    for await (const chunk of proc.stderr)
      err = (err + decoder.decode(chunk, { stream: true })).slice(-20_000);
  })();
  return {
    proc,
    lines,
    stderr: () => err,
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
          reject(new Error(`no matching line within ${timeoutMs} ms; stderr: ${err.slice(-2_000)}`));
        }, timeoutMs);
        waiters.add(check);
        check();
        void proc.exited.then(() => setTimeout(check, 50));
      });
    },
  };
}
