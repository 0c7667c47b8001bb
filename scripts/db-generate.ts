/**
 * `bun run db:generate [--name <name>]`: drizzle-kit diffs src/db/schema against drizzle/meta. Every
 * table a new migration enables row-level security on is also forced (`FORCE ROW LEVEL SECURITY`:
 * the tables' owner is held too, docs/architecture.md), which drizzle-kit does not write.
 */
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";

const drizzle = resolve(import.meta.dir, "../drizzle");
const migrations = () => new Set(readdirSync(drizzle).filter((name) => name.endsWith(".sql")));

const before = migrations();
const proc = Bun.spawnSync(["bunx", "drizzle-kit", "generate", ...process.argv.slice(2)], {
  stdout: "inherit",
  stderr: "inherit",
});
for (const name of migrations()) {
  if (before.has(name)) continue;
  const file = join(drizzle, name);
  const sql = readFileSync(file, "utf8");
  const forced = [...sql.matchAll(/^ALTER TABLE ("[^"]+") ENABLE ROW LEVEL SECURITY;/gm)]
    .map((match) => match[1] as string)
    .filter((table) => !sql.includes(`ALTER TABLE ${table} FORCE ROW LEVEL SECURITY;`))
    .map((table) => `ALTER TABLE ${table} FORCE ROW LEVEL SECURITY;`);
  if (forced.length === 0) continue;
  writeFileSync(
    file,
    `${sql.trimEnd()}--> statement-breakpoint\n${forced.join("--> statement-breakpoint\n")}\n`,
  );
  console.log(`${name}: FORCE ROW LEVEL SECURITY added for ${forced.length} table(s)`);
}
process.exit(proc.exitCode ?? 1);
