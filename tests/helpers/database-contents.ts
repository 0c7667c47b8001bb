import { sql } from "drizzle-orm";
import { type Db, execute } from "../../src/db/client.ts";

/**
 * Every table of schema public by name, with its row count and a digest of its rows, and every
 * sequence's last value: two equal snapshots, nothing was written between them (read as the owner,
 * whom row-level security does not filter here). A difference names the table.
 */
export async function databaseContents(db: Db): Promise<Record<string, string>> {
  const tables = await execute<{ name: string }>(
    db,
    sql`select tablename as name from pg_tables where schemaname = 'public' order by tablename`,
  );
  const contents: Record<string, string> = {};
  for (const { name } of tables) {
    const [row] = await execute<{ rows: number; digest: string }>(
      db,
      sql`select count(*)::int as rows, md5(coalesce(string_agg(t::text, E'\n' order by t::text), '')) as digest
          from ${sql.identifier("public")}.${sql.identifier(name)} t`,
    );
    contents[name] = `${row?.rows} rows, ${row?.digest}`;
  }
  const sequences = await execute<{ name: string; value: string | null }>(
    db,
    sql`select sequencename as name, last_value::text as value from pg_sequences where schemaname = 'public'`,
  );
  for (const { name, value } of sequences) contents[`sequence ${name}`] = String(value);
  return contents;
}
