import { afterAll, beforeAll, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import postgres from "postgres";
import { execute, openDatabase } from "../../src/db/client.ts";
import { migrate, readMigrations } from "../../src/db/migrator.ts";
import { databaseUrl, SERVER_URL } from "../helpers/database.ts";

// A migrator that owns the tables but is not a superuser (a managed PostgreSQL's usual account):
// FORCE ROW LEVEL SECURITY holds it too, so a data migration after the RLS migration would see no
// tenant row and change nothing, silently. The migrator runs on the platform path: it sees them all.

const MIGRATION = "0024_identity_memberships";
const tags = readMigrations().map((m) => m.tag);
const BEFORE = tags[tags.indexOf(MIGRATION) - 1] ?? "none";
const suffix = crypto.randomUUID().slice(0, 8);
const role = `plinth_owner_${suffix}`;
const name = `plinth_test_owner_${process.pid}_${suffix}`;
const admin = postgres(SERVER_URL, { max: 1, onnotice: () => {} });

/** The test database's URL as the owner role (local PostgreSQL trusts it). */
function asOwner(): string {
  const parsed = new URL(databaseUrl(name));
  parsed.username = role;
  parsed.password = "";
  return parsed.toString();
}

beforeAll(async () => {
  await admin.unsafe(`create role "${role}" login nosuperuser nobypassrls nocreaterole`);
  await admin.unsafe(`create database "${name}" owner "${role}" template template0`);
});

afterAll(async () => {
  await admin.unsafe(`drop database if exists "${name}" with (force)`);
  await admin.unsafe(`drop role if exists "${role}"`);
  await admin.end();
});

test("a non-superuser owner's migration changes every tenant's rows (the RLS migration before it notwithstanding)", async () => {
  const owner = await openDatabase(asOwner(), { poolSize: 1 });
  try {
    expect(tags.indexOf("0021_tenant_row_level_security")).toBeLessThan(tags.indexOf(MIGRATION));
    await migrate(owner.db, { to: BEFORE });
    // populated as a superuser (who passes RLS), as the rows of a live installation are
    const superuser = postgres(databaseUrl(name), { max: 1, onnotice: () => {} });
    try {
      const tenant = crypto.randomUUID();
      await superuser`insert into tenants (id, code, name) values (${tenant}, ${`t${suffix}`}, 'Tenant')`;
      await superuser`insert into users (tenant_id, email, name, password_hash)
                      values (${tenant}, ${`a-${suffix}@example.com`}, 'A', 'x')`;
    } finally {
      await superuser.end();
    }
    // the owner sees none of it outside the platform path: FORCE holds the owner
    const [seen] = await execute<{ n: number }>(owner.db, sql`select count(*)::int as n from users`);
    expect(seen?.n).toBe(0);

    await migrate(owner.db);
    const check = postgres(databaseUrl(name), { max: 1, onnotice: () => {} });
    try {
      const users = await check`select pool from users`;
      expect(users.map((u) => u.pool)).toEqual(["tenant"]);
      const memberships = await check`select role from tenant_memberships`;
      expect(memberships).toHaveLength(1);
    } finally {
      await check.end();
    }
  } finally {
    await owner.close();
  }
});
