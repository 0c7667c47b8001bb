import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import postgres from "postgres";
import { systemCtx } from "../../src/context.ts";
import { AppRoleError, ensureAppRole } from "../../src/db/app-role.ts";
import { execute } from "../../src/db/client.ts";
import {
  withDatabase,
  withPlatformTransaction,
  withTenantOrPlatform,
  withTransaction,
} from "../../src/db/operation.ts";
import { useTestDatabase } from "../helpers/app.ts";
import { databaseUrl, POOLER_URL } from "../helpers/database.ts";

/**
 * The tenant context of a transaction (docs/tenant-isolation.md): `withTransaction` and
 * `withDatabase` set `plinth.tenant_id` for the ctx's tenant and nothing else does; the platform
 * path is one named function; the setting ends with its transaction, on a connection PgBouncer
 * hands to its next user too; the migrator makes and checks the app role.
 */
const t = useTestDatabase();
const A = "0b7f8f5e-53a4-4c57-9a55-1f0fcd2b3c11";
const settings = sql`select coalesce(current_setting('plinth.tenant_id', true), '') as tenant,
  coalesce(current_setting('plinth.platform', true), '') as platform`;
type Settings = { tenant: string; platform: string };
const deps = () => ({ database: t.database });

describe("the tenant of a transaction", () => {
  test("withTransaction and withDatabase act in the ctx's tenant; a ctx without one sets nothing", async () => {
    const inTenant = await withTransaction(deps(), systemCtx("test", A), (tx) =>
      execute<Settings>(tx, settings),
    );
    expect(inTenant).toEqual([{ tenant: A, platform: "" }]);
    const read = await withDatabase(deps(), systemCtx("test", A), (db) => execute<Settings>(db, settings));
    expect(read).toEqual([{ tenant: A, platform: "" }]);
    const none = await withTransaction(deps(), systemCtx("test"), (tx) => execute<Settings>(tx, settings));
    expect(none).toEqual([{ tenant: "", platform: "" }]);
  });

  test("the platform path is withPlatformTransaction alone, and a tenant's transaction never joins it", async () => {
    const platform = await withPlatformTransaction(deps(), systemCtx("test"), (tx) =>
      execute<Settings>(tx, settings),
    );
    expect(platform).toEqual([{ tenant: "", platform: "on" }]);
    const staff = await withTenantOrPlatform(deps(), systemCtx("test"), (tx) =>
      execute<Settings>(tx, settings),
    );
    expect(staff).toEqual([{ tenant: "", platform: "on" }]);
    const tenant = await withTenantOrPlatform(deps(), systemCtx("test", A), (tx) =>
      execute<Settings>(tx, settings),
    );
    expect(tenant).toEqual([{ tenant: A, platform: "" }]);
    const joined = withTransaction(deps(), systemCtx("test", A), (_tx, ctx) =>
      withPlatformTransaction(deps(), ctx, async () => 1),
    );
    await expect(joined).rejects.toThrow(/platform path cannot join/);
    // a snapshot: repeatable read, read only, with the setting
    const snapshot = await withPlatformTransaction(
      deps(),
      systemCtx("test"),
      (tx) =>
        execute<{ level: string; ro: string }>(
          tx,
          sql`select current_setting('transaction_isolation') as level, current_setting('transaction_read_only') as ro`,
        ),
      { snapshot: true },
    );
    expect(snapshot).toEqual([{ level: "repeatable read", ro: "on" }]);
  });
});

describe("through PgBouncer (transaction pooling)", () => {
  let pooled: postgres.Sql;
  beforeAll(() => {
    pooled = postgres(databaseUrl(t.name, POOLER_URL), { max: 1, prepare: false, onnotice: () => {} });
  });
  afterAll(() => pooled.end());

  test("the next transaction on the same server connection has no tenant", async () => {
    const [inside] = await pooled.begin(async (tx) => {
      await tx`select set_config('plinth.tenant_id', ${A}, true)`;
      return tx<{ pid: number; tenant: string }[]>`
        select pg_backend_pid() as pid, current_setting('plinth.tenant_id', true) as tenant`;
    });
    expect(inside?.tenant).toBe(A);
    const [after] = await pooled<{ pid: number; tenant: string | null }[]>`
      select pg_backend_pid() as pid, current_setting('plinth.tenant_id', true) as tenant`;
    // one client, one idle server connection: PgBouncer hands the same one back, without the tenant
    expect(after?.pid).toBe(inside?.pid as number);
    expect(after?.tenant ?? "").toBe("");
  });
});

describe("the app role (bun run migrate)", () => {
  test("is made (or found) without SUPERUSER or BYPASSRLS and granted the tables; a superuser is refused", async () => {
    const role = "plinth_app";
    const outcome = await ensureAppRole(t.database.db, { role });
    expect(outcome.role).toBe(role);
    const [row] = await execute<{ super: boolean; bypass: boolean; can: boolean }>(
      t.database.db,
      sql`select rolsuper as super, rolbypassrls as bypass,
            has_table_privilege(${role}, 'public.users', 'select, insert, update, delete') as can
          from pg_roles where rolname = ${role}`,
    );
    expect(row).toEqual({ super: false, bypass: false, can: true });
    await expect(ensureAppRole(t.database.db, { role: "postgres" })).rejects.toBeInstanceOf(AppRoleError);
    await expect(ensureAppRole(t.database.db, { role: "Bad-Name" })).rejects.toBeInstanceOf(AppRoleError);
  });
});
