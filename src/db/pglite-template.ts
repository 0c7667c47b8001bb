import { createHash } from "node:crypto";
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { PGlite } from "@electric-sql/pglite";
import { drizzle } from "drizzle-orm/pglite";
import { type Db, isDataDir } from "./client.ts";
import { migrate, readMigrations } from "./migrator.ts";

/**
 * A migrated PGlite data directory, made once by `scripts/setup.sh` in a process of its own, that a
 * new embedded database is copied from instead of running initdb and every migration in the API
 * process. initdb starts a second PostgreSQL inside the process: it was most of the quickstart's
 * first start in time and all of its peak memory (docs/performance.md, "Cold start").
 */
const CACHE_DIR = fileURLToPath(new URL("../../.cache/pglite/", import.meta.url));
const PGLITE_PACKAGE = new URL("../../node_modules/@electric-sql/pglite/package.json", import.meta.url);

/** The PGlite release installed: a data directory of one release may not open in another. */
function pgliteVersion(): string {
  try {
    return (JSON.parse(readFileSync(PGLITE_PACKAGE, "utf8")) as { version?: string }).version ?? "unknown";
  } catch {
    return "unknown";
  }
}

/** The template's folder for this PGlite release and these migrations (whether it exists or not). */
export function templateDir(migrationsDir?: string): string {
  const hash = createHash("sha256").update(`pglite ${pgliteVersion()}\n`);
  for (const migration of readMigrations(migrationsDir)) hash.update(`${migration.tag} ${migration.hash}\n`);
  return join(CACHE_DIR, `template-${hash.digest("hex").slice(0, 16)}`);
}

/** Makes the template when it is absent; resolves whether it made one. */
export async function ensureTemplate(dir = templateDir()): Promise<boolean> {
  if (isDataDir(dir)) return false;
  // made aside and renamed when complete: a start never copies half a template
  const partial = `${dir}.partial-${process.pid}`;
  rmSync(partial, { recursive: true, force: true });
  mkdirSync(CACHE_DIR, { recursive: true });
  const client = new PGlite(partial);
  try {
    await client.waitReady;
    await migrate(drizzle(client, { casing: "snake_case" }) as unknown as Db);
    await client.exec("checkpoint");
  } finally {
    await client.close();
  }
  try {
    renameSync(partial, dir);
  } catch (error) {
    rmSync(partial, { recursive: true, force: true });
    // another setup made it meanwhile
    if (!isDataDir(dir)) throw error;
    return false;
  }
  // templates of earlier migration sets are never used again
  for (const name of readdirSync(CACHE_DIR))
    if (name.startsWith("template-") && join(CACHE_DIR, name) !== dir)
      rmSync(join(CACHE_DIR, name), { recursive: true, force: true });
  return true;
}
