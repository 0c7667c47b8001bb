import { expect, test } from "bun:test";
import { join } from "node:path";
import { useTestDatabase } from "../helpers/app.ts";
import { tracked } from "../helpers/children.ts";

/** Development without a cache: two OS processes on one database share the security windows. */
const t = useTestDatabase();

const worker = join(import.meta.dir, "../fixtures/window-worker.ts");

async function run(account: string, count: number, at: number): Promise<number> {
  const child = tracked(
    Bun.spawn(["bun", worker, t.url, account, String(count), String(at)], {
      stdout: "pipe",
      stderr: "pipe",
    }),
  );
  const [out, err, code] = await Promise.all([
    new Response(child.stdout).text(),
    new Response(child.stderr).text(),
    child.exited,
  ]);
  if (code !== 0) throw new Error(`worker failed (${code}): ${err}`);
  return (JSON.parse(out.trim()) as { allowed: number }).allowed;
}

test("two processes attempting at once get exactly the limit between them", async () => {
  const at = Date.parse("2026-11-22T10:00:00Z");
  const [first, second] = await Promise.all([run("dev@example.com", 5, at), run("dev@example.com", 5, at)]);
  expect(first + second).toBe(3);
  // a third process later in the same window is refused; after the window it is allowed again
  expect(await run("dev@example.com", 1, at + 60_000)).toBe(0);
  expect(await run("dev@example.com", 2, at + 900_001)).toBe(2);
});
