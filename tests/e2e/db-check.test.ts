import { afterAll, expect, test } from "bun:test";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "../helpers/process.ts";

/**
 * `bun run db:check` (the spec's pending-model-changes check) against the real schema and against
 * the real schema plus a table no migration holds. The extra schema file lives under
 * node_modules/.cache so that its imports resolve and nothing in the work tree changes.
 */
const dir = join(ROOT, "node_modules", ".cache", `db-check-${process.pid}`);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function dbCheck(args: string[] = []) {
  const proc = Bun.spawnSync(["bun", "scripts/db-check.ts", ...args], {
    cwd: ROOT,
    stdout: "pipe",
    stderr: "pipe",
  });
  return { code: proc.exitCode, output: `${proc.stdout.toString()}${proc.stderr.toString()}` };
}

test("db:check passes on the schema as migrated and fails on a change without a migration", () => {
  const clean = dbCheck();
  expect(clean.output).toContain("schema and migrations agree");
  expect(clean.code).toBe(0);

  mkdirSync(dir, { recursive: true });
  const schema = join(dir, "schema.ts");
  writeFileSync(
    schema,
    `export * from ${JSON.stringify(join(ROOT, "src/db/schema/index.ts"))};
import { pgTable, text } from "drizzle-orm/pg-core";
export const unmigrated = pgTable("unmigrated_thing", { id: text().primaryKey() });
`,
  );
  const changed = dbCheck(["--schema", schema]);
  expect(changed.code).toBe(1);
  expect(changed.output).toContain("the schema has changes without a migration");
}, 60_000);
