import { expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { lockDirectory } from "../../src/db/pglite-lock.ts";

const dir = () => join(mkdtempSync(join(tmpdir(), "plinth-lock-")), "dev");

test("one holder per directory, in this process too; released, it can be taken again", () => {
  const path = dir();
  const release = lockDirectory(path);
  expect(readFileSync(`${path}.lock`, "utf8").trim()).toBe(String(process.pid));
  expect(() => lockDirectory(path)).toThrow(
    `embedded database ${path} is in use by process ${process.pid} (this one)`,
  );
  release();
  expect(existsSync(`${path}.lock`)).toBe(false);
  lockDirectory(path)();
});

test("a lock file of a process that is gone, or of this pid before an exec, is stale", () => {
  const path = dir();
  writeFileSync(`${path}.lock`, "999999999\n");
  lockDirectory(path)();
  writeFileSync(`${path}.lock`, `${process.pid}\n`);
  lockDirectory(path)();
});

test("a live holder is named with the lock file", () => {
  const path = dir();
  writeFileSync(`${path}.lock`, `${process.ppid}\n`);
  expect(() => lockDirectory(path)).toThrow(`in use by process ${process.ppid} (lock file ${path}.lock)`);
});
