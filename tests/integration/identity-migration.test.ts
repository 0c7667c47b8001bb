import { afterAll, beforeAll, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { recordAudit } from "../../src/audit/record.ts";
import { opaqueToken, tokenHash } from "../../src/auth/opaque-tokens.ts";
import { systemCtx } from "../../src/context.ts";
import { execute } from "../../src/db/client.ts";
import { migrate, migrateDown, readMigrations } from "../../src/db/migrator.ts";
import { hashPassword } from "../../src/security/passwords.ts";
import { createTestApp, relaxedLimits, type TestApp, testConfig } from "../helpers/app.ts";
import { createTestDatabase, type TestDatabase } from "../helpers/database.ts";
import { bearer, json, login, PASSWORD } from "../helpers/identity.ts";

// Issue #32 point 2: users, passwords, sessions and audit links of a database populated BEFORE the
// memberships migration survive it, and its Down step brings every row back as it was.

const MIGRATION = "0024_identity_memberships";
const tags = readMigrations().map((m) => m.tag);
/** The migration just before this one: the schema the database is populated on. */
const BEFORE = tags[tags.indexOf(MIGRATION) - 1] ?? "none";

let t: TestDatabase;
afterAll(() => t?.drop());

const ids = {
  tenantA: crypto.randomUUID(),
  tenantB: crypto.randomUUID(),
  staff: crypto.randomUUID(),
  aliceA: crypto.randomUUID(),
  aliceB: crypto.randomUUID(),
  bob: crypto.randomUUID(),
  session: crypto.randomUUID(),
};
const refreshToken = opaqueToken();

/** Every row the migration touches, as text, in a fixed order. */
async function rows(): Promise<string[]> {
  const out: string[] = [];
  for (const table of [
    "tenants",
    "users",
    "tenant_memberships",
    "sessions",
    "refresh_tokens",
    "audit_events",
    "audit_chains",
  ]) {
    const found = await execute<{ r: string }>(
      t.database.db,
      sql`select row_to_json(x)::text as r from ${sql.identifier(table)} x order by 1`,
    );
    out.push(...found.map((row) => `${table} ${row.r}`));
  }
  return out;
}

beforeAll(async () => {
  t = await createTestDatabase({ empty: true });
  const db = t.database.db;
  await migrate(db, { to: BEFORE });
  const hashA = await hashPassword(PASSWORD);
  const hashB = await hashPassword(`${PASSWORD}-b`);
  await execute(
    db,
    sql`insert into tenants (id, code, name) values (${ids.tenantA}, 'mig-a', 'A'), (${ids.tenantB}, 'mig-b', 'B')`,
  );
  // alice@ in both tenants (two people, two passwords), bob disabled in A, one member of staff
  await execute(
    db,
    sql`insert into users (id, tenant_id, email, name, password_hash, status) values
      (${ids.staff}, null, 'staff@example.com', 'Staff', ${hashA}, 'Active'),
      (${ids.aliceA}, ${ids.tenantA}, 'alice@example.com', 'Alice A', ${hashA}, 'Active'),
      (${ids.aliceB}, ${ids.tenantB}, 'alice@example.com', 'Alice B', ${hashB}, 'Active'),
      (${ids.bob}, ${ids.tenantA}, 'bob@example.com', 'Bob', ${hashA}, 'Disabled')`,
  );
  await execute(db, sql`insert into platform_roles (code, name) values ('platform_admin', 'Administrator')`);
  await execute(
    db,
    sql`insert into platform_role_bindings (user_id, role) values (${ids.staff}, 'platform_admin')`,
  );
  await execute(
    db,
    sql`insert into tenant_memberships (tenant_id, user_id, role) values
      (${ids.tenantA}, ${ids.aliceA}, 'owner'), (${ids.tenantB}, ${ids.aliceB}, 'member'), (${ids.tenantA}, ${ids.bob}, 'member')`,
  );
  const expires = new Date(Date.now() + 86_400_000).toISOString();
  await execute(
    db,
    sql`insert into sessions (id, user_id, tenant_id, kind, expires_at) values (${ids.session}, ${ids.aliceA}, ${ids.tenantA}, 'token', ${expires}::timestamptz)`,
  );
  await execute(
    db,
    sql`insert into refresh_tokens (session_id, token_hash, expires_at) values (${ids.session}, ${tokenHash(refreshToken)}, ${expires}::timestamptz)`,
  );
  await recordAudit(db, systemCtx("test", ids.tenantA), {
    action: "user.created",
    target: { type: "user", id: ids.aliceA },
    details: { role: "owner" },
  });
}, 60_000);

test("migrating keeps every user, password, session and audit link; its Down step restores every row", async () => {
  const db = t.database.db;
  const before = await rows();
  expect(await migrate(db)).toContain(MIGRATION);
  const pools = await execute<{ id: string; pool: string; tenant_id: string | null; password_hash: string }>(
    db,
    sql`select id, pool, tenant_id, password_hash from users order by email, pool`,
  );
  expect(pools.map((u) => [u.id, u.pool, u.tenant_id])).toEqual(
    expect.arrayContaining([
      [ids.staff, "platform", null],
      [ids.aliceA, "tenant", ids.tenantA],
      [ids.aliceB, "tenant", ids.tenantB],
      [ids.bob, "tenant", ids.tenantA],
    ]),
  );
  const [bob] = await execute<{ status: string }>(
    db,
    sql`select status from tenant_memberships where user_id = ${ids.bob}`,
  );
  expect(bob?.status).toBe("Disabled");
  // the same rows where the old schema had them (passwords, sessions, refresh tokens, audit)
  // (the columns later migrations added, e.g. a session's `amr`, are not this migration's)
  const after = await rows();
  const columns = (row: string) => JSON.parse(row.slice(row.indexOf(" ") + 1)) as Record<string, unknown>;
  for (const table of ["sessions", "refresh_tokens", "audit_events", "audit_chains"]) {
    const was = before.filter((r) => r.startsWith(`${table} `)).map(columns);
    const now = after.filter((r) => r.startsWith(`${table} `)).map(columns);
    expect(
      now.map((row, i) => Object.fromEntries(Object.keys(was[i] ?? {}).map((k) => [k, row[k]]))),
    ).toEqual(was);
  }

  // down: every row exactly as it was
  let tag: string | null;
  do tag = await migrateDown(db);
  while (tag !== null && tag !== MIGRATION);
  expect(tag).toBe(MIGRATION);
  expect(await rows()).toEqual(before);
  await migrate(db);
}, 60_000);

test("after the migration the old password signs in, the old refresh token rotates, two alices stay two", async () => {
  const app: TestApp = await createTestApp({
    database: t.database,
    config: testConfig({ settings: { ...relaxedLimits } }),
  });
  try {
    const refreshed = await app.request("/api/auth/refresh", json({ refreshToken }));
    expect(refreshed.status).toBe(200);
    const inA = await login(app, { email: "alice@example.com", tenant: "mig-a" });
    expect(inA.status).toBe(200);
    const tokens = (await inA.json()) as { accessToken: string };
    const me = (await (await app.request("/api/auth/me", bearer(tokens.accessToken))).json()) as {
      user: { id: string };
      roles: string[];
      memberships: { tenant: { id: string; code: string; name: string }; role: string }[];
    };
    expect(me.user.id).toBe(ids.aliceA);
    expect(me.memberships).toEqual([
      { tenant: { id: ids.tenantA, code: "mig-a", name: "A" }, role: "owner" },
    ]);
    // B's alice has B's password, and A's does not open B
    expect((await login(app, { email: "alice@example.com", tenant: "mig-b" })).status).toBe(401);
    expect(
      (await login(app, { email: "alice@example.com", tenant: "mig-b", password: `${PASSWORD}-b` })).status,
    ).toBe(200);
    expect((await login(app, { email: "bob@example.com", tenant: "mig-a" })).status).toBe(401);
    expect((await login(app, { email: "staff@example.com" })).status).toBe(200);
    // the audit row still names the user, who still exists
    const [linked] = await execute<{ n: number }>(
      t.database.db,
      sql`select count(*)::int as n from audit_events a join users u on u.id::text = a.target_id where a.action = 'user.created'`,
    );
    expect(linked?.n).toBe(1);
  } finally {
    await app.close();
  }
}, 60_000);

test("the Down step refuses, changing nothing, while an identity is a member of two tenants", async () => {
  const db = t.database.db;
  const shared = crypto.randomUUID();
  await execute(
    db,
    sql`insert into users (id, pool, email, name) values (${shared}, 'shared', 'two@example.com', 'Two')`,
  );
  await execute(
    db,
    sql`insert into tenant_memberships (tenant_id, user_id) values (${ids.tenantA}, ${shared}), (${ids.tenantB}, ${shared})`,
  );
  // the later migrations' Down steps first (what they drop is theirs, not this step's): then
  // this step's Down is the next, and it must change nothing
  const [later] = await execute<{ n: number }>(
    db,
    sql`select count(*)::int as n from schema_migrations where tag > ${MIGRATION}`,
  );
  for (let i = 0; i < (later?.n ?? 0); i++) expect(await migrateDown(db)).not.toBe(MIGRATION);
  const before = await rows();
  let tag: string | null = null;
  let refused: unknown;
  try {
    tag = await migrateDown(db);
  } catch (error) {
    refused = error;
  }
  expect(tag).toBeNull();
  expect(String(refused)).toContain("several tenants");
  expect(await rows()).toEqual(before);
  // with one membership left it goes down, and the person becomes that tenant's own user
  await execute(
    db,
    sql`delete from tenant_memberships where user_id = ${shared} and tenant_id = ${ids.tenantB}`,
  );
  do tag = await migrateDown(db);
  while (tag !== null && tag !== MIGRATION);
  const [row] = await execute<{ tenant_id: string }>(
    db,
    sql`select tenant_id from users where id = ${shared}`,
  );
  expect(row?.tenant_id).toBe(ids.tenantA);
  await migrate(db);
}, 60_000);
