import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { stopChildrenAfterAll, tracked } from "../helpers/children.ts";
import { ROOT } from "../helpers/process.ts";
import { freePort } from "../helpers/redis-server.ts";

// `npm run dev`'s server (`bun src/server.ts --migrate --embedded`, in a folder of its own) given an
// administrator whose password the rules refuse: it stops, and says the rule in plain words, not
// only in a JSON log line (issue #28: "or the rule when the given one is refused").
stopChildrenAfterAll();
const dir = mkdtempSync(join(tmpdir(), "plinth-quickstart-refused-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function devWith(password: string) {
  const proc = tracked(
    Bun.spawn(["bun", join(ROOT, "src/server.ts"), "--migrate", "--embedded"], {
      cwd: dir,
      env: {
        PATH: process.env.PATH ?? "",
        HOME: process.env.HOME ?? "/tmp",
        PORT: String(await freePort()),
        PLINTH_BOOTSTRAP_PLATFORM_ADMIN_EMAIL: "owner@example.com",
        PLINTH_BOOTSTRAP_PLATFORM_ADMIN_PASSWORD: password,
        PLINTH_BOOTSTRAP_PLATFORM_ADMIN_NAME: "Owner",
      },
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
    }),
  );
  const [stdout, stderr, code] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited,
  ]);
  return { code, stdout, stderr };
}

test("a guessable administrator password stops the start with the rule in plain words, never the password", async () => {
  const { code, stdout, stderr } = await devWith("password1234");
  expect(code).not.toBe(0);
  expect(stdout).not.toContain("Plinth is running");
  expect(stderr).toContain(
    "Plinth did not start: the administrator in PLINTH_BOOTSTRAP_PLATFORM_ADMIN_* was refused.",
  );
  expect(stderr).toContain("PLINTH_BOOTSTRAP_PLATFORM_ADMIN_PASSWORD is too easy to guess");
  expect(stderr).toContain("The rule: at least 12 characters");
  expect(stderr).toContain("npm run dev then makes an administrator with a");
  expect(stdout + stderr).not.toContain("password1234");
}, 120_000);

test("a short one names the length", async () => {
  const { code, stderr } = await devWith("short");
  expect(code).not.toBe(0);
  expect(stderr).toContain("PLINTH_BOOTSTRAP_PLATFORM_ADMIN_PASSWORD must be at least 12 characters");
  expect(stderr).toContain("The rule: at least 12 characters");
}, 120_000);
