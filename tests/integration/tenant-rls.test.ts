import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { eq, sql } from "drizzle-orm";
import postgres from "postgres";
import { systemCtx } from "../../src/context.ts";
import { DEFAULT_APP_ROLE, ensureAppRole } from "../../src/db/app-role.ts";
import { type Database, execute } from "../../src/db/client.ts";
import {
  withDatabase,
  withPlatformDatabase,
  withPlatformTransaction,
  withTransaction,
} from "../../src/db/operation.ts";
import { tenantMemberships, users } from "../../src/db/schema/index.ts";
import { scopedRunnerOf } from "../../src/db/tenant-scope.ts";
import { asRole, createTestDatabase, openTestDatabase, type TestDatabase } from "../helpers/database.ts";
import { createTenant, createUser } from "../helpers/identity.ts";
import { ROOT } from "../helpers/process.ts";

/**
 * Row-level security (issue #30): as the API's role (`plinth_app`: no superuser, no BYPASSRLS, owns
 * nothing), raw SQL without a tenant context reads no tenant row and writes none; in tenant A's
 * context it neither sees nor writes tenant B's rows; the context set per transaction does not
 * survive into the next transaction on the same pooled connection (through PgBouncer in the scaled
 * topology); and `db:isolation` fails on a tenant table without RLS. The setup writes as the owner.
 */
let t: TestDatabase;
let app: postgres.Sql;
let appDb: Database;
let tenantA: { id: string };
let tenantB: { id: string };
let userA: string;
let userB: string;

const asAppRole = (url: string) => asRole(url, DEFAULT_APP_ROLE);

beforeAll(async () => {
  t = await createTestDatabase();
  await ensureAppRole(t.database.db, { role: DEFAULT_APP_ROLE });
  tenantA = await createTenant(t.database.db);
  tenantB = await createTenant(t.database.db);
  userA = (await createUser(t.database.db, tenantA.id)).id;
  userB = (await createUser(t.database.db, tenantB.id)).id;
  app = postgres(asAppRole(t.directUrl), { max: 1, onnotice: () => {} });
  // as the app connects in this topology: through PgBouncer (transaction mode) in the scaled one
  appDb = await openTestDatabase(asAppRole(t.url), { poolSize: 1 });
});

afterAll(async () => {
  await app?.end();
  await appDb?.close();
  await t?.drop();
});

describe("raw SQL as the API's role", () => {
  test("the role is held: no superuser, no BYPASSRLS, owns nothing", async () => {
    const [role] = await app`select rolsuper, rolbypassrls from pg_roles where rolname = current_user`;
    expect(role).toEqual({ rolsuper: false, rolbypassrls: false });
    const [owned] =
      await app`select count(*)::int as n from pg_class where relowner = (select oid from pg_roles where rolname = current_user)`;
    expect(owned?.n).toBe(0);
  });

  test("without a tenant context it reads no tenant row and cannot insert one", async () => {
    const [asOwner] = await execute<{ n: number }>(
      t.database.db,
      sql`select count(*)::int as n from users where tenant_id is not null`,
    );
    expect(asOwner?.n).toBeGreaterThanOrEqual(2);
    const [seen] = await app`select count(*)::int as n from users`;
    expect(seen?.n).toBe(0);
    const [memberships] = await app`select count(*)::int as n from tenant_memberships`;
    expect(memberships?.n).toBe(0);
    const insert = app`insert into tenant_memberships (tenant_id, user_id, role) values (${tenantA.id}, ${userB}, 'member')`;
    await expect(insert.then()).rejects.toMatchObject({ code: "42501" });
  });

  test("in tenant A's context it sees A's rows only and cannot write B's", async () => {
    const rows = await app.begin(async (tx) => {
      await tx`select set_config('plinth.tenant_id', ${tenantA.id}, true)`;
      return tx<{ id: string; tenant_id: string }[]>`select id, tenant_id from users`;
    });
    expect(rows.map((r) => r.id)).toEqual([userA]);
    await expect(
      app.begin(async (tx) => {
        await tx`select set_config('plinth.tenant_id', ${tenantA.id}, true)`;
        await tx`insert into tenant_memberships (tenant_id, user_id, role) values (${tenantB.id}, ${userA}, 'member')`;
      }),
    ).rejects.toMatchObject({ code: "42501" });
    const changed = await app.begin(async (tx) => {
      await tx`select set_config('plinth.tenant_id', ${tenantA.id}, true)`;
      return tx`update users set name = 'taken over' where id = ${userB}`;
    });
    expect(changed.count).toBe(0);
    // moving A's row to B is refused by the policy's check
    await expect(
      app.begin(async (tx) => {
        await tx`select set_config('plinth.tenant_id', ${tenantA.id}, true)`;
        await tx`update tenant_memberships set tenant_id = ${tenantB.id} where user_id = ${userA}`;
      }),
    ).rejects.toMatchObject({ code: "42501" });
    const [b] = await t.database.db.select({ name: users.name }).from(users).where(eq(users.id, userB));
    expect(b?.name).toBe("Test User");
  });

  test("a shared identity is seen in the tenants it is a member of, and in no other", async () => {
    const email = `shared${crypto.randomUUID().slice(0, 8)}@example.com`;
    const [shared] = await t.database.db
      .insert(users)
      .values({ tenantId: null, pool: "shared", email, name: "Shared" })
      .returning({ id: users.id });
    const sharedId = shared?.id ?? "";
    await t.database.db
      .insert(tenantMemberships)
      .values({ tenantId: tenantA.id, userId: sharedId, role: "member" });
    const seenIn = async (tenantId: string) =>
      app.begin(async (tx) => {
        await tx`select set_config('plinth.tenant_id', ${tenantId}, true)`;
        return tx<{ id: string }[]>`select id from users where id = ${sharedId}`;
      });
    try {
      expect((await seenIn(tenantA.id)).length).toBe(1);
      expect((await seenIn(tenantB.id)).length).toBe(0);
      // and without a context, not at all
      expect((await app<{ id: string }[]>`select id from users where id = ${sharedId}`).length).toBe(0);
    } finally {
      // the other tests count tenant A's users
      await t.database.db.delete(users).where(eq(users.id, sharedId));
    }
  });
});

describe("tables reached through a parent, as the API's role", () => {
  test("a refresh token is seen and written in its session's tenant only", async () => {
    const owner = postgres(t.directUrl, { max: 1, onnotice: () => {} });
    try {
      const tokenOf = async (tenantId: string, userId: string) => {
        const [session] = await owner<{ id: string }[]>`
          insert into sessions (user_id, tenant_id, expires_at)
          values (${userId}, ${tenantId}, now() + interval '1 hour') returning id`;
        await owner`insert into refresh_tokens (session_id, token_hash, expires_at)
          values (${session?.id ?? ""}, ${crypto.randomUUID()}, now() + interval '1 hour')`;
        return session?.id ?? "";
      };
      const sessionA = await tokenOf(tenantA.id, userA);
      const sessionB = await tokenOf(tenantB.id, userB);
      const seen = (tenantId: string) =>
        app.begin(async (tx) => {
          await tx`select set_config('plinth.tenant_id', ${tenantId}, true)`;
          return tx<{ session_id: string }[]>`select session_id from refresh_tokens`;
        });
      expect((await seen(tenantA.id)).map((r) => r.session_id)).toEqual([sessionA]);
      expect((await seen(tenantB.id)).map((r) => r.session_id)).toEqual([sessionB]);
      const [none] = await app`select count(*)::int as n from refresh_tokens`;
      expect(none?.n).toBe(0);
      // a token for B's session, written in A's context: refused by the check through the parent
      await expect(
        app.begin(async (tx) => {
          await tx`select set_config('plinth.tenant_id', ${tenantA.id}, true)`;
          await tx`insert into refresh_tokens (session_id, token_hash, expires_at)
            values (${sessionB}, ${crypto.randomUUID()}, now() + interval '1 hour')`;
        }),
      ).rejects.toMatchObject({ code: "42501" });
    } finally {
      await owner.end();
    }
  });
});

describe("the operations' paths as the API's role", () => {
  const appDeps = () => ({ database: appDb });

  test("withTransaction sees and writes the ctx tenant's rows only", async () => {
    const seen = async (tenantId: string) =>
      withTransaction(appDeps(), systemCtx("test", tenantId), (tx) =>
        tx.select({ id: users.id }).from(users),
      );
    expect((await seen(tenantA.id)).map((r) => r.id)).toEqual([userA]);
    expect((await seen(tenantB.id)).map((r) => r.id)).toEqual([userB]);
    // a ctx without a tenant sets no context: nothing
    expect(await withDatabase(appDeps(), systemCtx("test"), (db) => db.select().from(users))).toEqual([]);
    await expect(
      withTransaction(appDeps(), systemCtx("test", tenantA.id), (tx) =>
        tx.insert(tenantMemberships).values({ tenantId: tenantB.id, userId: userA }),
      ),
    ).rejects.toThrow();
    const renamed = await withTransaction(appDeps(), systemCtx("test", tenantA.id), (tx) =>
      tx.update(users).set({ name: "A's user" }).where(eq(users.id, userA)).returning({ id: users.id }),
    );
    expect(renamed).toEqual([{ id: userA }]);
  });

  test("withDatabase carries the ctx tenant's context in each statement", async () => {
    const ctxA = systemCtx("test", tenantA.id);
    const read = await withDatabase(appDeps(), ctxA, async (db) => {
      // with parameters, then without (sent in the extended protocol too, the context ahead of it)
      const first = await db.select({ id: users.id }).from(users).where(eq(users.tenantId, tenantA.id));
      const second = await execute<{ id: string; v: string }>(
        db,
        sql`select id, current_setting('plinth.tenant_id', true) as v from users`,
      );
      return { first, second };
    });
    expect(read.first.map((r) => r.id)).toEqual([userA]);
    expect(read.second).toEqual([{ id: userA, v: tenantA.id }]);
    // B's row is not there to read, nor to write
    expect(
      await withDatabase(appDeps(), ctxA, (db) => db.select().from(users).where(eq(users.id, userB))),
    ).toEqual([]);
    await expect(
      withDatabase(appDeps(), ctxA, (db) =>
        db.insert(tenantMemberships).values({ tenantId: tenantB.id, userId: userA }),
      ),
    ).rejects.toMatchObject({ cause: { code: "42501" } });
    // a single statement writes in the ctx tenant
    const renamed = await withDatabase(appDeps(), ctxA, (db) =>
      db.update(users).set({ name: "renamed in A" }).where(eq(users.id, userA)).returning({ id: users.id }),
    );
    expect(renamed).toEqual([{ id: userA }]);
    // a tenant id that is no uuid names no tenant: nothing
    expect(
      await withDatabase(appDeps(), systemCtx("test", "not-a-uuid"), (db) => db.select().from(users)),
    ).toEqual([]);
    // statements of two tenants in flight at once on the one pooled connection: each its own context
    const [a, b] = await Promise.all(
      [tenantA.id, tenantB.id].map((tenantId) =>
        withDatabase(appDeps(), systemCtx("test", tenantId), (db) => db.select({ id: users.id }).from(users)),
      ),
    );
    expect(a?.map((r) => r.id)).toEqual([userA]);
    expect(b?.map((r) => r.id)).toEqual([userB]);
    // the executor is the work's only: used after it ended, it refuses
    let kept: Parameters<Parameters<typeof withDatabase>[2]>[0] | undefined;
    await withDatabase(appDeps(), ctxA, async (db) => {
      kept = db;
    });
    await expect(kept?.select().from(users).then()).rejects.toMatchObject({
      cause: { message: expect.stringContaining("used after its work ended") },
    });
  });

  test("withPlatformDatabase is named and sees every tenant, statement by statement", async () => {
    const all = await withPlatformDatabase(appDeps(), systemCtx("test"), (db) =>
      db.select({ id: users.id }).from(users),
    );
    expect(all.map((r) => r.id)).toEqual(expect.arrayContaining([userA, userB]));
    // never inside a tenant's transaction
    await expect(
      withTransaction(appDeps(), systemCtx("test", tenantA.id), (_tx, ctx) =>
        withPlatformDatabase(appDeps(), ctx, (db) => db.select().from(users)),
      ),
    ).rejects.toThrow("not a platform one");
  });

  test("the platform path is named and sees every tenant", async () => {
    const all = await withPlatformTransaction(appDeps(), systemCtx("test"), (tx) =>
      tx.select({ id: users.id }).from(users),
    );
    expect(all.map((r) => r.id)).toEqual(expect.arrayContaining([userA, userB]));
  });
});

describe("the context ends with its transaction", () => {
  test("on one pooled connection (through PgBouncer in the scaled topology)", async () => {
    // t.url: what the app is given, the pooler in the scaled topology; one connection, so the next
    // transaction is the very next one on it
    const pooled = postgres(t.url, { max: 1, prepare: false, onnotice: () => {} });
    try {
      const inside = await pooled.begin(async (tx) => {
        await tx`select set_config('plinth.tenant_id', ${tenantA.id}, true)`;
        return tx<{ v: string }[]>`select current_setting('plinth.tenant_id', true) as v`;
      });
      expect(inside[0]?.v).toBe(tenantA.id);
      const [after] = await pooled<
        { v: string | null }[]
      >`select current_setting('plinth.tenant_id', true) as v`;
      expect(after?.v ?? "").toBe("");
    } finally {
      await pooled.end();
    }
  });
  const setting = async (db: Database) =>
    (
      await execute<{ v: string | null }>(db.db, sql`select current_setting('plinth.tenant_id', true) as v`)
    )[0]?.v;

  test("on the app's pooled connection as the API's role (through PgBouncer in the scaled topology)", async () => {
    // one connection: the next statement runs on the very connection the scoped transaction used
    const pooled = await openTestDatabase(asAppRole(t.url), { poolSize: 1 });
    try {
      const deps = { database: pooled };
      const inside = await withTransaction(deps, systemCtx("test", tenantA.id), async (tx) =>
        execute<{ v: string }>(tx, sql`select current_setting('plinth.tenant_id', true) as v`),
      );
      expect(inside[0]?.v).toBe(tenantA.id);
      expect(await setting(pooled)).toBeFalsy();
      // a read-mode scope's COMMIT is not waited for: the next statement still finds the context gone
      const run = scopedRunnerOf(pooled.db);
      if (!run) throw new Error("no pipelined runner on PostgreSQL");
      const read = await run(
        { tenantId: tenantB.id },
        (tx) => execute<{ v: string }>(tx, sql`select current_setting('plinth.tenant_id', true) as v`),
        "read",
      );
      expect(read[0]?.v).toBe(tenantB.id);
      expect(await setting(pooled)).toBeFalsy();
      await withPlatformTransaction(deps, systemCtx("test"), async () => {});
      const [platform] = await execute<{ v: string | null }>(
        pooled.db,
        sql`select current_setting('plinth.platform', true) as v`,
      );
      expect(platform?.v).toBeFalsy();
      // withDatabase's per-statement context ends with its statement, as does the platform one's
      const [inRead] = await withDatabase(deps, systemCtx("test", tenantA.id), (db) =>
        execute<{ v: string }>(db, sql`select current_setting('plinth.tenant_id', true) as v`),
      );
      expect(inRead?.v).toBe(tenantA.id);
      expect(await setting(pooled)).toBeFalsy();
      await withPlatformDatabase(deps, systemCtx("test"), (db) => execute(db, sql`select 1`));
      const [afterPlatformRead] = await execute<{ v: string | null }>(
        pooled.db,
        sql`select current_setting('plinth.platform', true) as v`,
      );
      expect(afterPlatformRead?.v).toBeFalsy();
      // so does one whose statement failed
      await expect(
        withDatabase(deps, systemCtx("test", tenantA.id), (db) => execute(db, sql`select 1/${0}::int`)),
      ).rejects.toThrow();
      expect(await setting(pooled)).toBeFalsy();
      // a failed transaction leaves nothing behind either
      await expect(
        withTransaction(deps, systemCtx("test", tenantA.id), async (tx) => {
          await execute(tx, sql`select 1/0`);
        }),
      ).rejects.toThrow();
      expect(await setting(pooled)).toBeFalsy();
    } finally {
      await pooled.close();
    }
  });
});

describe("db:isolation", () => {
  const run = (args: string[] = []) => {
    const proc = Bun.spawnSync(["bun", "scripts/db-isolation.ts", ...args], {
      cwd: ROOT,
      stdout: "pipe",
      stderr: "pipe",
    });
    return { code: proc.exitCode, output: `${proc.stdout.toString()}${proc.stderr.toString()}` };
  };

  test("passes on the migrations and fails, naming the table, on a tenant table without RLS", () => {
    const clean = run();
    expect(clean.output).toContain("each with RLS enabled, forced and a tenant policy");
    expect(clean.code).toBe(0);
    // at least the three of migration 0033 (refresh_tokens, webhook_delivery_attempts,
    // platform_role_bindings); later tables (a user's second factors) join them
    const children =
      /(\d+) reached through a parent, each with RLS enabled, forced and a policy through it/.exec(
        clean.output,
      );
    expect(Number(children?.[1])).toBeGreaterThanOrEqual(3);
    const fixtures = [
      "tenant-table-without-rls.sql",
      "tenant-table-not-forced.sql",
      "child-table-without-policy.sql",
    ].flatMap((file) => ["--fixture", join(ROOT, "tests/fixtures", file)]);
    const failed = run(fixtures);
    expect(failed.code).toBe(1);
    expect(failed.output).toContain(
      "unguarded_notes: lacks ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY, a policy on plinth.tenant_id",
    );
    expect(failed.output).toContain("half_guarded_notes: lacks FORCE ROW LEVEL SECURITY\n");
    expect(failed.output).toContain(
      "unguarded_user_notes: lacks a policy through its parent (users) for all commands (parentIsolation())",
    );
  }, 120_000);
});
