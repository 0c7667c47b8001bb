// `bun run db:isolation` (part of `bun run check`): migrates an in-memory PGlite with every migration
// in drizzle/ and fails, naming the table, when a table with a `tenant_id` column lacks row-level
// security (ENABLE), FORCE (the owner held too) or a policy on `plinth.tenant_id` for every command.
// `--fixture <file.sql>` (repeatable) runs more SQL after the migrations (the test proves the check fails on a
// tenant table without them). docs/architecture.md, "Every tenant table is born with its policy".
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { sql } from "drizzle-orm";
import { execute, openDatabase } from "../src/db/client.ts";
import { migrate } from "../src/db/migrator.ts";

const { values } = parseArgs({ options: { fixture: { type: "string", multiple: true } } });

interface TenantTable {
  name: string;
  enabled: boolean;
  forced: boolean;
  policies: number;
}

const database = await openDatabase("pglite:memory:");
let failures: string[] = [];
let count = 0;
try {
  await migrate(database.db);
  // one statement at a time: PGlite prepares what it is sent, and a prepared statement is one command
  const fixture = (values.fixture ?? [])
    .map((file) => readFileSync(file, "utf8").replace(/--.*$/gm, ""))
    .join(";\n");
  for (const statement of fixture.split(/;\s*$/m).filter((s) => s.trim()))
    await database.db.execute(sql.raw(statement));
  const tables = await execute<TenantTable>(
    database.db,
    sql`select c.relname as name, c.relrowsecurity as enabled, c.relforcerowsecurity as forced,
          (select count(*)::int from pg_policy p
            where p.polrelid = c.oid and p.polcmd = '*' and p.polpermissive
              and pg_get_expr(p.polqual, p.polrelid) like '%plinth.tenant_id%'
              and pg_get_expr(p.polwithcheck, p.polrelid) like '%plinth.tenant_id%') as policies
        from pg_class c join pg_namespace n on n.oid = c.relnamespace
        where n.nspname = 'public' and c.relkind in ('r', 'p')
          and exists (select 1 from pg_attribute a
                      where a.attrelid = c.oid and a.attname = 'tenant_id' and not a.attisdropped)
        order by c.relname`,
  );
  count = tables.length;
  failures = tables.flatMap((t) => {
    const missing = [
      t.enabled ? "" : "ENABLE ROW LEVEL SECURITY",
      t.forced ? "" : "FORCE ROW LEVEL SECURITY",
      t.policies > 0 ? "" : "a policy on plinth.tenant_id for all commands (tenantIsolation())",
    ].filter(Boolean);
    return missing.length ? [`${t.name}: lacks ${missing.join(", ")}`] : [];
  });
} finally {
  await database.close();
}
if (failures.length > 0) {
  for (const failure of failures) console.error(`db:isolation: ${failure}`);
  console.error(
    "db:isolation: every table with tenant_id is born with its policy: docs/architecture.md, 'Every tenant table is born with its policy'",
  );
  process.exit(1);
}
console.log(`db:isolation: ${count} tenant tables, each with RLS enabled, forced and a tenant policy`);
