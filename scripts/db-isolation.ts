// `bun run db:isolation` (part of `bun run check`): migrates an in-memory PGlite with every migration
// in drizzle/ and fails, naming the table, when a table with a `tenant_id` column lacks row-level
// security (ENABLE), FORCE (the owner held too) or a policy on `plinth.tenant_id` for every command, and
// when a table without `tenant_id` that references a tenant table (a child reached through its
// parent: refresh_tokens through sessions) lacks ENABLE, FORCE or a policy that reads through that
// parent for every command (parentIsolation()).
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
let childCount = 0;
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
  // children: no tenant_id, a foreign key to a table with one; the policy must read through a parent
  const children = await execute<TenantTable & { parents: string }>(
    database.db,
    sql`select c.relname as name, c.relrowsecurity as enabled, c.relforcerowsecurity as forced,
          string_agg(distinct p.relname, ', ') as parents,
          (select count(*)::int from pg_policy y
            where y.polrelid = c.oid and y.polcmd = '*' and y.polpermissive
              and exists (select 1 from pg_constraint k2 join pg_class p2 on p2.oid = k2.confrelid
                          where k2.conrelid = c.oid and k2.contype = 'f'
                            and pg_get_expr(y.polqual, y.polrelid) like '%' || quote_ident(p2.relname) || '%'
                            and pg_get_expr(y.polwithcheck, y.polrelid) like '%' || quote_ident(p2.relname) || '%'
                            and exists (select 1 from pg_attribute a2 where a2.attrelid = p2.oid
                                          and a2.attname = 'tenant_id' and not a2.attisdropped))) as policies
        from pg_class c
        join pg_constraint k on k.conrelid = c.oid and k.contype = 'f'
        join pg_class p on p.oid = k.confrelid
        where c.relnamespace = 'public'::regnamespace and c.relkind in ('r', 'p')
          and not exists (select 1 from pg_attribute a
                          where a.attrelid = c.oid and a.attname = 'tenant_id' and not a.attisdropped)
          and exists (select 1 from pg_attribute a
                      where a.attrelid = p.oid and a.attname = 'tenant_id' and not a.attisdropped)
        group by c.oid, c.relname, c.relrowsecurity, c.relforcerowsecurity
        order by c.relname`,
  );
  count = tables.length;
  childCount = children.length;
  const childFailures = children.flatMap((t) => {
    const missing = [
      t.enabled ? "" : "ENABLE ROW LEVEL SECURITY",
      t.forced ? "" : "FORCE ROW LEVEL SECURITY",
      t.policies > 0 ? "" : `a policy through its parent (${t.parents}) for all commands (parentIsolation())`,
    ].filter(Boolean);
    return missing.length ? [`${t.name}: lacks ${missing.join(", ")}`] : [];
  });
  failures = tables.flatMap((t) => {
    const missing = [
      t.enabled ? "" : "ENABLE ROW LEVEL SECURITY",
      t.forced ? "" : "FORCE ROW LEVEL SECURITY",
      t.policies > 0 ? "" : "a policy on plinth.tenant_id for all commands (tenantIsolation())",
    ].filter(Boolean);
    return missing.length ? [`${t.name}: lacks ${missing.join(", ")}`] : [];
  });
  failures.push(...childFailures);
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
console.log(
  `db:isolation: ${count} tenant tables, each with RLS enabled, forced and a tenant policy; ${childCount} reached through a parent, each with RLS enabled, forced and a policy through it`,
);
