import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import postgres from "postgres";
import { execute } from "../../src/db/client.ts";
import { readMigrations } from "../../src/db/migrator.ts";
import { verifyPassword } from "../../src/security/passwords.ts";
import { startApi } from "../helpers/api-process.ts";
import { stopChildrenAfterAll } from "../helpers/children.ts";
import {
  asRole,
  createTestDatabase,
  databaseUrl,
  openTestDatabase,
  SERVER_URL,
  type TestDatabase,
  testDatabaseUrl,
  topologyEnv,
} from "../helpers/database.ts";
import { databaseContents } from "../helpers/database-contents.ts";
import { runEntry } from "../helpers/process.ts";
import { validProductionEnv } from "../helpers/production-env.ts";

const PASSWORD = "correct-horse-battery-staple";
const admin = {
  PLINTH_BOOTSTRAP_PLATFORM_ADMIN_EMAIL: "Admin@Example.com",
  PLINTH_BOOTSTRAP_PLATFORM_ADMIN_PASSWORD: PASSWORD,
  PLINTH_BOOTSTRAP_PLATFORM_ADMIN_NAME: "First Admin",
};

async function counts(t: TestDatabase) {
  const [row] = await execute<{ users: number; bindings: number }>(
    t.database.db,
    sql`select (select count(*)::int from users) as users, (select count(*)::int from platform_role_bindings) as bindings`,
  );
  return row;
}

stopChildrenAfterAll();

describe("Production first install: bun run migrate --bootstrap-platform-admin", () => {
  let t: TestDatabase;
  let env: Record<string, string>;
  beforeAll(async () => {
    t = await createTestDatabase({ empty: true });
    env = { PLINTH_ENVIRONMENT: "Production", DATABASE_URL: t.url };
  });
  afterAll(() => t.drop());

  test("weak input is refused before anything changes, without echoing the password", async () => {
    const weak = "short-pw";
    const run = await runEntry("src/migrate.ts", ["--bootstrap-platform-admin"], {
      ...env,
      ...admin,
      PLINTH_BOOTSTRAP_PLATFORM_ADMIN_PASSWORD: weak,
      PLINTH_BOOTSTRAP_PLATFORM_ADMIN_EMAIL: "not-an-email",
    });
    expect(run.exitCode).toBe(3);
    const output = run.stdout + run.stderr;
    expect(output).toContain("PLINTH_BOOTSTRAP_PLATFORM_ADMIN_PASSWORD must be at least 12 characters");
    expect(output).toContain("PLINTH_BOOTSTRAP_PLATFORM_ADMIN_EMAIL must be a valid e-mail address");
    expect(output).not.toContain(weak);
    const [tables] = await execute<{ n: number }>(
      t.database.db,
      sql`select count(*)::int as n from information_schema.tables where table_schema = 'public'`,
    );
    expect(tables?.n).toBe(0);
  });

  test("a long but guessable password is refused too, by name, never echoed", async () => {
    for (const guessable of ["password1234", "aaaaaaaaaaaaaaaa", "qwertyuiop123"]) {
      const run = await runEntry("src/migrate.ts", ["--bootstrap-platform-admin"], {
        ...env,
        ...admin,
        PLINTH_BOOTSTRAP_PLATFORM_ADMIN_PASSWORD: guessable,
      });
      expect(run.exitCode).toBe(3);
      const output = run.stdout + run.stderr;
      expect(output).toContain("PLINTH_BOOTSTRAP_PLATFORM_ADMIN_PASSWORD is too easy to guess");
      expect(output).not.toContain(guessable);
    }
    // refused before anything changed: not even the tables exist yet
    const [tables] = await execute<{ n: number }>(
      t.database.db,
      sql`select count(*)::int as n from information_schema.tables where table_schema = 'public'`,
    );
    expect(tables?.n).toBe(0);
  });

  test("Production without the flag migrates and seeds but never bootstraps", async () => {
    const run = await runEntry("src/migrate.ts", [], { ...env, ...admin });
    expect(run.exitCode).toBe(0);
    expect(run.stdout).toContain("ignored");
    expect(await counts(t)).toEqual({ users: 0, bindings: 0 });
  });

  test("with the flag: creates the admin, hashed with argon2id, who must change the password", async () => {
    const run = await runEntry("src/migrate.ts", ["--bootstrap-platform-admin"], { ...env, ...admin });
    expect(run.exitCode).toBe(0);
    expect(run.stdout + run.stderr).not.toContain(PASSWORD);
    const [user] = await execute<{
      email: string;
      name: string;
      password_hash: string;
      must_change_password: boolean;
      tenant_id: string | null;
    }>(t.database.db, sql`select email, name, password_hash, must_change_password, tenant_id from users`);
    expect(user?.email).toBe("admin@example.com");
    expect(user?.name).toBe("First Admin");
    expect(user?.tenant_id).toBeNull();
    expect(user?.must_change_password).toBe(true);
    expect(user?.password_hash).toStartWith("$argon2id$");
    expect(await verifyPassword(PASSWORD, user?.password_hash ?? "")).toBe(true);
    const [binding] = await execute<{ role: string }>(
      t.database.db,
      sql`select role from platform_role_bindings`,
    );
    expect(binding?.role).toBe("platform_admin");
  });

  test("a second bootstrap is refused with exit code 2 and changes nothing", async () => {
    const before = await execute(t.database.db, sql`select id, email, password_hash, updated_at from users`);
    const run = await runEntry("src/migrate.ts", ["--bootstrap-platform-admin"], {
      ...env,
      ...admin,
      PLINTH_BOOTSTRAP_PLATFORM_ADMIN_EMAIL: "other@example.com",
      PLINTH_BOOTSTRAP_PLATFORM_ADMIN_PASSWORD: "another-long-password",
    });
    expect(run.exitCode).toBe(2);
    expect(run.stdout + run.stderr).toContain("already exists");
    expect(await execute(t.database.db, sql`select id, email, password_hash, updated_at from users`)).toEqual(
      before,
    );
  });

  test("--status lists every migration as applied; --down then migrate round-trips", async () => {
    const status = await runEntry("src/migrate.ts", ["--status"], env);
    expect(status.exitCode).toBe(0);
    for (const m of readMigrations()) expect(status.stdout).toMatch(new RegExp(`${m.tag}\\s+applied`));
    const down = await runEntry("src/migrate.ts", ["--down"], env);
    expect(down.exitCode).toBe(0);
    // the newest migration with a Down step goes first
    const newest =
      readMigrations()
        .filter((m) => m.down)
        .at(-1)?.tag ?? "";
    expect(down.stdout).toContain(newest);
    const again = await runEntry("src/migrate.ts", [], env);
    expect(again.exitCode).toBe(0);
    expect(again.stdout).toContain(newest);
  });
});

describe("managed PostgreSQL: the operator makes the API's role, the migrator may not (no CREATEROLE)", () => {
  // roles are the server's: names of this run's own; the database is owned by the migrator's role
  const suffix = `${process.pid}_${crypto.randomUUID().slice(0, 8)}`;
  const migrator = `plinth_mig_${suffix}`;
  const apiRole = `plinth_api_${suffix}`;
  const name = `plinth_managed_${suffix}`;
  const server = postgres(SERVER_URL, { max: 1, onnotice: () => {} });
  const migratorEnv = {
    PLINTH_ENVIRONMENT: "Production",
    DATABASE_URL: asRole(databaseUrl(name), migrator),
    Database__AppRole: apiRole,
  };
  beforeAll(async () => {
    await server.unsafe(`create role "${migrator}" login nosuperuser nobypassrls nocreaterole nocreatedb`);
    await server.unsafe(`create database "${name}" owner "${migrator}" template template0`);
  });
  afterAll(async () => {
    await server.unsafe(`drop database if exists "${name}" with (force)`);
    await server.unsafe(`drop role if exists "${apiRole}"`);
    await server.unsafe(`drop role if exists "${migrator}"`);
    await server.end();
  });

  test("a missing role it may not create fails Production's migrator, naming the role and what to do", async () => {
    const run = await runEntry("src/migrate.ts", [], migratorEnv);
    expect(run.exitCode).toBe(1);
    const line =
      run.stdout.split("\n").find((l) => l.includes("the API's database role is unusable")) ?? "{}";
    expect(JSON.parse(line)).toMatchObject({
      level: "error",
      role: apiRole,
      problem: `could not create role ${apiRole} (42501): create it as the operator (docs/deployment.md, "The database roles")`,
    });
  });

  test("the operator's role is checked and granted; the API serves in Production as it, and refuses the migrator's", async () => {
    await server.unsafe(
      `create role "${apiRole}" login nosuperuser nobypassrls nocreatedb nocreaterole password 'operator-chose-it'`,
    );
    const migrated = await runEntry("src/migrate.ts", ["--bootstrap-platform-admin"], {
      ...migratorEnv,
      ...admin,
    });
    expect(migrated.exitCode).toBe(0);
    expect(migrated.stdout).toMatch(new RegExp(`"msg":"API role checked and granted".*"role":"${apiRole}"`));
    const database = postgres(databaseUrl(name), { max: 1, onnotice: () => {} });
    try {
      const [grants] = await database.unsafe(
        `select has_table_privilege('${apiRole}', 'tenants', 'select, insert, update, delete') as dml,
                has_table_privilege('${apiRole}', 'schema_migrations', 'insert') as migrations,
                (select count(*)::int from pg_class c join pg_roles r on r.oid = c.relowner
                  where r.rolname = '${apiRole}') as owned`,
      );
      expect({ ...grants }).toEqual({ dml: true, migrations: false, owned: 0 });
    } finally {
      await database.end();
    }

    // one set of keys for the serving starts (each validProductionEnv() makes a new tenant-secret master key)
    const settings = validProductionEnv({ CACHE_URL: "redis://127.0.0.1:6379", Database__AppRole: apiRole });
    const production = (role: string) => ({
      ...settings,
      ...topologyEnv(asRole(testDatabaseUrl(name), role)),
    });
    const otherKey = validProductionEnv().PLINTH_TENANT_SECRET_MASTER_KEY ?? "";
    const contents = async () => {
      // as the server's superuser: row-level security (forced on the migrator's tables) filters no row
      const owner = await openTestDatabase(databaseUrl(name), { poolSize: 1 });
      try {
        return await databaseContents(owner.db);
      } finally {
        await owner.close();
      }
    };
    const before = await contents();
    // the migrator's role owns the tables (no superuser): FORCE holds it, but it may drop the policies;
    // refused under another master key than the serving starts', it records nothing (no key binding)
    const refused = startApi({ ...production(migrator), PLINTH_TENANT_SECRET_MASTER_KEY: otherKey });
    expect(await refused.proc.exited).toBe(1);
    const line = await refused.waitForLine((l) => l.includes(`connect as Database:AppRole (${apiRole})`));
    expect(JSON.parse(line)).toMatchObject({ level: "error", role: migrator });
    expect(await contents()).toEqual(before);

    const api = startApi(production(apiRole));
    try {
      const port = await api.listening(30_000);
      const call = async (path: string, body?: unknown, token?: string) => {
        const response = await fetch(`http://127.0.0.1:${port}${path}`, {
          method: body === undefined ? "GET" : "POST",
          headers: {
            host: "api.example.com",
            "content-type": "application/json",
            ...(token ? { authorization: `Bearer ${token}` } : {}),
          },
          body: body === undefined ? undefined : JSON.stringify(body),
        });
        return {
          status: response.status,
          body: (await response.json().catch(() => null)) as Record<string, unknown>,
        };
      };
      expect((await call("/api/health/ready")).status).toBe(200);
      // the first administrator signs in (a shared-identity lookup by e-mail), sets a password,
      // creates a tenant and reads it in the tenant's context
      const first = await call("/api/auth/login", {
        email: admin.PLINTH_BOOTSTRAP_PLATFORM_ADMIN_EMAIL,
        password: PASSWORD,
      });
      expect(first.status).toBe(200);
      const changed = await call(
        "/api/auth/password",
        { currentPassword: PASSWORD, newPassword: `${crypto.randomUUID()}-Dd4` },
        String(first.body.accessToken),
      );
      expect(changed.status).toBe(200);
      const token = String(changed.body.accessToken);
      const tenant = await call("/api/admin/tenants", { code: "managed", name: "Managed" }, token);
      expect(tenant.status).toBe(201);
      const features = await call(`/api/admin/tenants/${tenant.body.id}/features`, undefined, token);
      expect(features.status).toBe(200);
      expect(api.lines.some((l) => l.includes("connect as Database:AppRole"))).toBe(false);
    } finally {
      expect(await api.stop()).toBe(0);
    }

    // the serving start recorded its key under tk1: the refused start's key is refused now, by key
    // id, with exit 1 before the port opens, writing nothing
    const served = await contents();
    const otherKeyed = await runEntry("src/server.ts", [], {
      ...production(apiRole),
      PLINTH_TENANT_SECRET_MASTER_KEY: otherKey,
      PORT: "0",
    });
    expect(otherKeyed.exitCode).toBe(1);
    expect(otherKeyed.stderr).toBe(
      "Start-up failed: Security:TenantSecrets key id(s) tk1: a different master key is configured under this key id than the one its secrets were encrypted with: restore the original key for this key id (a new key needs a new key id)\n",
    );
    expect(otherKeyed.stdout).not.toContain('"msg":"listening"');
    expect(otherKeyed.stdout + otherKeyed.stderr).not.toContain(otherKey);
    expect(await contents()).toEqual(served);
  }, 90_000);
});

describe("Development", () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await createTestDatabase({ empty: true });
  });
  afterAll(() => t.drop());

  test("bootstraps without the flag when the variables are set, once", async () => {
    const env = { DATABASE_URL: t.url, ...admin };
    const first = await runEntry("src/migrate.ts", [], env);
    expect(first.exitCode).toBe(0);
    expect(await counts(t)).toEqual({ users: 1, bindings: 1 });
    const second = await runEntry("src/migrate.ts", [], env);
    expect(second.exitCode).toBe(0);
    expect(second.stdout).toContain("bootstrap skipped");
    expect(await counts(t)).toEqual({ users: 1, bindings: 1 });
  });
});

describe("two migrator processes at once", () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await createTestDatabase({ empty: true });
  });
  afterAll(() => t.drop());

  test("both succeed; every migration is applied exactly once", async () => {
    const env = { DATABASE_URL: t.url };
    const [a, b] = await Promise.all([
      runEntry("src/migrate.ts", [], env),
      runEntry("src/migrate.ts", [], env),
    ]);
    expect([a.exitCode, b.exitCode]).toEqual([0, 0]);
    const rows = await execute<{ tag: string }>(
      t.database.db,
      sql`select tag from schema_migrations order by tag`,
    );
    expect(rows.map((r) => r.tag)).toEqual(readMigrations().map((m) => m.tag));
    expect((a.stdout + b.stdout).match(/database is up to date/g)?.length).toBe(1);
  });
});

describe("usage", () => {
  test("--help documents the flags and exit codes; unknown flags exit 64", async () => {
    const help = await runEntry("src/migrate.ts", ["--help"], {});
    expect(help.exitCode).toBe(0);
    expect(help.stdout).toContain("--bootstrap-platform-admin");
    expect(help.stdout).toContain("Exit codes");
    const bad = await runEntry("src/migrate.ts", ["--frobnicate"], {});
    expect(bad.exitCode).toBe(64);
  });

  test("an unreachable database exits 1 without printing its password", async () => {
    const run = await runEntry("src/migrate.ts", [], {
      DATABASE_URL: "postgres://u:hunter2-secret@127.0.0.1:1/db",
    });
    expect(run.exitCode).toBe(1);
    expect(run.stdout + run.stderr).not.toContain("hunter2-secret");
  });
});
