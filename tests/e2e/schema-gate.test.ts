import { afterAll, describe, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import postgres from "postgres";
import { execute } from "../../src/db/client.ts";
import { readMigrations, servingLockHolders } from "../../src/db/migrator.ts";
import { records, startApi } from "../helpers/api-process.ts";
import { stopChildrenAfterAll } from "../helpers/children.ts";
import {
  appRoleEnv,
  asRole,
  createTestDatabase,
  databaseUrl,
  type TestDatabase,
  topologyEnv,
} from "../helpers/database.ts";
import { databaseContents } from "../helpers/database-contents.ts";
import { waitFor } from "../helpers/jobs.ts";
import { runEntry } from "../helpers/process.ts";
import { validProductionEnv } from "../helpers/production-env.ts";
import { TcpProxy } from "../helpers/tcp-proxy.ts";

/**
 * The schema gate (issue #15, point 1) and start-up naming the cause of a database failure
 * (point 2), with the real API process and migrator against PostgreSQL.
 */
const shipped = readMigrations().map((m) => m.tag);
const dbs: TestDatabase[] = [];
stopChildrenAfterAll();
afterAll(async () => {
  for (const t of dbs) await t.drop();
});
async function database(empty: boolean): Promise<TestDatabase> {
  const t = await createTestDatabase({ empty });
  dbs.push(t);
  return t;
}

interface Health {
  status: string;
  checks: Record<string, { status: string; output?: string }[]>;
}
async function ready(port: number): Promise<{ status: number; body: Health }> {
  const response = await fetch(`http://127.0.0.1:${port}/api/health/ready`);
  return { status: response.status, body: (await response.json()) as Health };
}

describe("the API's role: Production refuses one row-level security does not hold", () => {
  const suffix = `${process.pid}_${crypto.randomUUID().slice(0, 8)}`;
  const roles: { t: TestDatabase; role: string }[] = [];
  afterAll(async () => {
    // runs before the file's afterAll drops the databases: the roles' grants and tables go first
    const admin = postgres(databaseUrl("postgres"), { max: 1, onnotice: () => {} });
    try {
      for (const { t, role } of roles) {
        await t.database.db.execute(sql.raw(`reassign owned by "${role}" to current_user`));
        await t.database.db.execute(sql.raw(`drop owned by "${role}"`));
        await admin.unsafe(`drop role if exists "${role}"`);
      }
    } finally {
      await admin.end();
    }
  });
  /** A login role of this test's own on `t`, allowed to read the schema's tables (the schema gate reads them). */
  const ownRole = async (t: TestDatabase, name: string, attributes: string) => {
    const role = `plinth_${name}_${suffix}`;
    roles.push({ t, role });
    await t.database.db.execute(sql.raw(`create role "${role}" login nosuperuser ${attributes}`));
    await t.database.db.execute(sql.raw(`grant select on all tables in schema public to "${role}"`));
    return role;
  };
  const production = (url: string, extra: Record<string, string> = {}) =>
    validProductionEnv({ ...topologyEnv(url), CACHE_URL: "redis://127.0.0.1:6379", ...extra });
  const refusal = async (api: ReturnType<typeof startApi>, options = { listened: false }) => {
    expect(await api.proc.exited).toBe(1);
    const line = await api.waitForLine((l) => l.includes("which `bun run migrate` creates and grants"));
    expect(api.lines.some((l) => l.includes('"msg":"listening"'))).toBe(options.listened);
    return JSON.parse(line) as Record<string, unknown>;
  };
  const sentence = (role: string, reason: string) =>
    `the API connects as role ${role}, ${reason}; connect as Database:AppRole (plinth_app), which \`bun run migrate\` creates and grants (docs/deployment.md, "The database roles")`;

  test("as a superuser (the owner here): refused, one line naming the role and what to do", async () => {
    const t = await database(false);
    const api = startApi(production(t.url));
    expect(await refusal(api)).toMatchObject({
      level: "error",
      msg: sentence("postgres", "a superuser: row-level security does not hold it"),
      role: "postgres",
      appRole: "plinth_app",
    });
    expect(api.stderr()).toBe("");
  });

  test("a refused start writes nothing: the API's role then serves under another master key, which is recorded; a third key is refused", async () => {
    const t = await database(false);
    const before = await databaseContents(t.database.db);
    // each validProductionEnv() is another tenant-secret master key under the key id tk1
    const refused = startApi(production(t.url));
    expect(await refusal(refused)).toMatchObject({ level: "error", role: "postgres" });
    // not the key binding (recorded before the role gate until now), nor anything else
    expect(await databaseContents(t.database.db)).toEqual(before);

    const served = validProductionEnv({ ...appRoleEnv(t.url), CACHE_URL: "redis://127.0.0.1:6379" });
    const api = startApi(served);
    try {
      const port = await api.listening(30_000);
      const probe = await fetch(`http://127.0.0.1:${port}/api/health/ready`, {
        headers: { host: "api.example.com" },
      });
      expect(probe.status).toBe(200);
      expect(api.lines.some((l) => l.includes("restore the original key"))).toBe(false);
    } finally {
      expect(await api.stop()).toBe(0);
    }
    const keyIds = await execute<{ key_id: string }>(
      t.database.db,
      sql`select key_id from tenant_secret_keys`,
    );
    expect(keyIds.map((r) => r.key_id)).toEqual(["tk1"]);

    const after = await databaseContents(t.database.db);
    const third = validProductionEnv({
      ...appRoleEnv(t.url),
      CACHE_URL: "redis://127.0.0.1:6379",
      PORT: "0",
    });
    const run = await runEntry("src/server.ts", [], third);
    expect(run.exitCode).toBe(1);
    expect(run.stderr).toBe(
      "Start-up failed: Security:TenantSecrets key id(s) tk1: a different master key is configured under this key id than the one its secrets were encrypted with: restore the original key for this key id (a new key needs a new key id)\n",
    );
    expect(run.stdout).not.toContain('"msg":"listening"');
    expect(run.stdout + run.stderr).not.toContain(third.PLINTH_TENANT_SECRET_MASTER_KEY ?? "");
    expect(await databaseContents(t.database.db)).toEqual(after);
  }, 60_000);

  test("as a BYPASSRLS role: refused", async () => {
    const t = await database(false);
    const role = await ownRole(t, "bypass", "bypassrls");
    const api = startApi(production(asRole(t.url, role)));
    expect(await refusal(api)).toMatchObject({
      level: "error",
      msg: sentence(role, "a BYPASSRLS role: row-level security does not hold it"),
      role,
    });
  });

  test("as a table owner that is no superuser (FORCE holds it, but it may drop the policies): refused", async () => {
    const t = await database(false);
    const role = await ownRole(t, "owner", "nobypassrls");
    await t.database.db.execute(sql.raw(`alter table tenants owner to "${role}"`));
    const api = startApi(production(asRole(t.url, role)));
    expect(await refusal(api)).toMatchObject({
      level: "error",
      msg: sentence(
        role,
        "the owner of 1 table in schema public: it may drop their row-level security policies",
      ),
      role,
    });
  });

  test("as the API's role (plinth_app): serves, ready", async () => {
    const t = await database(false);
    const api = startApi(validProductionEnv({ ...appRoleEnv(t.url), CACHE_URL: "redis://127.0.0.1:6379" }));
    try {
      const port = await api.listening(30_000);
      const probe = await fetch(`http://127.0.0.1:${port}/api/health/ready`, {
        headers: { host: "api.example.com" },
      });
      expect(probe.status).toBe(200);
      expect(api.lines.some((l) => l.includes("connect as Database:AppRole"))).toBe(false);
    } finally {
      expect(await api.stop()).toBe(0);
    }
  }, 40_000);

  /** `url` reached through a proxy that is down while the API starts, then comes up. */
  const outAtStartUp = async (url: string) => {
    const target = new URL(url);
    const proxy = await TcpProxy.start({ host: target.hostname, port: Number(target.port || 5432) });
    proxies.push(proxy);
    proxy.down();
    const through = new URL(url);
    through.port = String(proxy.port);
    return { proxy, url: through.toString() };
  };
  const outageEnv = { BackgroundProcessing__JobPollSeconds: "1" };
  const proxies: TcpProxy[] = [];
  afterAll(async () => {
    for (const proxy of proxies) await proxy.close();
  });

  test("the database out at start-up: once it is back, Production refuses a superuser then (exit 1, no loop)", async () => {
    const t = await database(false);
    const before = await databaseContents(t.database.db);
    const { proxy, url } = await outAtStartUp(t.url);
    const api = startApi({ ...production(url), ...outageEnv });
    await api.listening(30_000);
    await api.waitForLine((l) => l.includes('"msg":"database check failed"'));
    proxy.up();
    expect(await refusal(api, { listened: true })).toMatchObject({
      level: "error",
      msg: sentence("postgres", "a superuser: row-level security does not hold it"),
      role: "postgres",
    });
    expect(api.lines.some((l) => l.includes('"msg":"background loops started"'))).toBe(false);
    // nothing said the loops were starting: the role was checked first
    expect(api.lines.some((l) => l.includes("starting the background loops"))).toBe(false);
    // the drain is not held up by a connection the outage cut (the serving lock's, before the fix)
    expect(api.lines.some((l) => l.includes("shutdown timeout"))).toBe(false);
    // no key binding recorded once the database was back: the role was refused first
    expect(await databaseContents(t.database.db)).toEqual(before);
  }, 60_000);

  test("the database out at start-up: once it is back, Production refuses a different master key under a recorded key id (exit 1, no loop)", async () => {
    const t = await database(false);
    // the key id tk1 (validProductionEnv's) was recorded with another key than this start's
    await t.database.db.execute(
      sql`insert into tenant_secret_keys (key_id, fingerprint) values ('tk1', 'recorded-by-another-key')`,
    );
    const before = await databaseContents(t.database.db);
    const { proxy, url } = await outAtStartUp(appRoleEnv(t.url).DATABASE_URL ?? "");
    const env = validProductionEnv({
      ...appRoleEnv(t.url),
      DATABASE_URL: url,
      CACHE_URL: "redis://127.0.0.1:6379",
      ...outageEnv,
    });
    const api = startApi(env);
    await api.listening(30_000);
    const unverified = await api.waitForLine((l) => l.includes("key bindings not verified"));
    expect(JSON.parse(unverified)).toMatchObject({
      level: "warn",
      msg: "key bindings not verified: the database did not answer; serving, and they are checked once it is back, before the background loops start (Production refuses a mismatch then)",
    });
    proxy.up();
    expect(await api.proc.exited).toBe(1);
    const line = await api.waitForLine((l) => l.includes("restore the original key"));
    expect(JSON.parse(line)).toMatchObject({
      level: "error",
      msg: "Security:TenantSecrets key id(s) tk1: a different master key is configured under this key id than the one its secrets were encrypted with: restore the original key for this key id (a new key needs a new key id)",
      environment: "Production",
    });
    expect(api.lines.some((l) => l.includes('"msg":"background loops started"'))).toBe(false);
    expect(api.lines.some((l) => l.includes("starting the background loops"))).toBe(false);
    expect(api.lines.some((l) => l.includes('"signal":"refused"'))).toBe(true);
    expect(api.stderr()).toBe("");
    const master = env.PLINTH_TENANT_SECRET_MASTER_KEY ?? "";
    expect(api.lines.join("\n")).not.toContain(master);
    expect(await databaseContents(t.database.db)).toEqual(before);
  }, 60_000);

  test("the database out at start-up: as the API's role, once it is back, the loops start", async () => {
    const t = await database(false);
    const { proxy, url } = await outAtStartUp(appRoleEnv(t.url).DATABASE_URL ?? "");
    const api = startApi(
      validProductionEnv({
        ...appRoleEnv(t.url),
        DATABASE_URL: url,
        CACHE_URL: "redis://127.0.0.1:6379",
        ...outageEnv,
      }),
    );
    try {
      await api.listening(30_000);
      await api.waitForLine((l) => l.includes('"msg":"database check failed"'));
      proxy.up();
      await api.waitForLine((l) => l.includes('"msg":"background loops started"'), 30_000);
      expect(api.lines.some((l) => l.includes("connect as Database:AppRole"))).toBe(false);
      // in the order it happened: the database back, its checks passed, then the loops
      const at = (msg: string) => api.lines.findIndex((l) => l.includes(`"msg":"${msg}"`));
      const order = [
        at("database check recovered"),
        at("the database has every migration this release ships: starting the background loops"),
        at("background loops started"),
      ];
      expect(order[0]).toBeGreaterThan(0);
      expect(order).toEqual([...order].sort((a, b) => a - b));
      // the key binding start-up could not read is recorded once the checks passed, before the loops
      const keyIds = await execute<{ key_id: string }>(
        t.database.db,
        sql`select key_id from tenant_secret_keys`,
      );
      expect(keyIds.map((r) => r.key_id)).toEqual(["tk1"]);
    } finally {
      expect(await api.stop()).toBe(0);
    }
    expect(api.lines.some((l) => l.includes("shutdown timeout"))).toBe(false);
  }, 60_000);

  test("Development as a superuser: warns once, naming the role, and serves", async () => {
    const t = await database(false);
    const api = startApi({ PLINTH_ENVIRONMENT: "Development", ...topologyEnv(t.url) });
    try {
      const port = await api.listening();
      expect((await ready(port)).status).toBe(200);
      const warnings = records(api.lines).filter((r) => r.appRole === "plinth_app");
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatchObject({
        level: "warn",
        msg: `${sentence("postgres", "a superuser: row-level security does not hold it")}; serving anyway (Development)`,
        role: "postgres",
        environment: "Development",
      });
    } finally {
      expect(await api.stop()).toBe(0);
    }
  });
});

describe("behind: migrations pending", () => {
  test("Production refuses to start, naming them", async () => {
    const t = await database(true);
    const api = startApi(validProductionEnv(appRoleEnv(t.url)));
    expect(await api.proc.exited).toBe(1);
    const line = await api.waitForLine((l) => l.includes("migrations pending"));
    expect(JSON.parse(line)).toMatchObject({
      level: "error",
      msg: `${shipped.length} migrations pending: run \`bun run migrate\``,
      pending: shipped,
    });
    expect(api.lines.some((l) => l.includes('"msg":"listening"'))).toBe(false);
    expect(api.stderr()).toBe("");
  });

  test("Production refuses one migration pending, writing nothing (no key binding either)", async () => {
    const t = await database(false);
    const newest = shipped.at(-1) ?? "";
    await t.database.db.execute(sql`delete from schema_migrations where tag = ${newest}`);
    const before = await databaseContents(t.database.db);
    const api = startApi(validProductionEnv({ ...appRoleEnv(t.url), CACHE_URL: "redis://127.0.0.1:6379" }));
    expect(await api.proc.exited).toBe(1);
    const line = await api.waitForLine(
      (l) => l.includes("migrations pending") || l.includes("migration pending"),
    );
    expect(JSON.parse(line)).toMatchObject({ level: "error", pending: [newest] });
    expect(await databaseContents(t.database.db)).toEqual(before);
  });

  test("elsewhere it serves, not ready, loops waiting; ready once migrated, without a restart", async () => {
    const t = await database(true);
    const api = startApi({ PLINTH_ENVIRONMENT: "Development", DATABASE_URL: t.url });
    try {
      const port = await api.listening();
      expect(api.lines.some((l) => l.includes(`${shipped.length} migrations pending`))).toBe(true);
      const before = await ready(port);
      expect(before.status).toBe(503);
      expect(before.body.checks["database:responseTime"]?.[0]?.status).toBe("pass");
      expect(before.body.checks["database:migrations"]?.[0]).toMatchObject({
        status: "fail",
        output: `${shipped.length} migrations pending: run \`bun run migrate\``,
      });

      const migrated = await runEntry("src/migrate.ts", [], {
        PLINTH_ENVIRONMENT: "Development",
        DATABASE_URL: t.url,
      });
      expect(migrated.exitCode).toBe(0);
      const after = await ready(port);
      expect(after.status).toBe(200);
      expect(after.body.checks["database:migrations"]?.[0]?.status).toBe("pass");
      // the loops started only now, and never failed on a missing table meanwhile
      await api.waitForLine((l) => l.includes('"msg":"background loops started"'));
      const waited = api.lines.findIndex((l) => l.includes("starting the background loops"));
      expect(waited).toBeGreaterThan(0);
      expect(api.lines.some((l) => l.includes("does not exist") || l.includes("tick failed"))).toBe(false);
    } finally {
      expect(await api.stop()).toBe(0);
    }
  }, 60_000);
});

test("`--migrate` migrates first: Production on an empty database starts ready", async () => {
  const t = await database(true);
  // the API as its role; the migrator over the direct URL as the owner (it creates the tables)
  const api = startApi(validProductionEnv({ ...appRoleEnv(t.url), DATABASE_DIRECT_URL: t.directUrl }), [
    "--migrate",
  ]);
  try {
    const port = await api.listening(30_000);
    expect(api.lines.some((l) => l.includes("migrations pending"))).toBe(false);
    const host = { host: "api.example.com" };
    const probe = await fetch(`http://127.0.0.1:${port}/api/health/ready`, { headers: host });
    expect(probe.status).toBe(200);
  } finally {
    expect(await api.stop()).toBe(0);
  }
}, 40_000);

describe("ahead, and `migrate --down` while serving", () => {
  test("unknown migrations: serves and warns once; --down refused while it serves, unless --force", async () => {
    const t = await database(false);
    await execute(
      t.database.db,
      sql`insert into schema_migrations (tag, hash) values ('9000_from_the_future', 'x')`,
    );
    const api = startApi({ PLINTH_ENVIRONMENT: "Development", DATABASE_URL: t.url });
    try {
      const port = await api.listening();
      expect((await ready(port)).status).toBe(200);
      await api.waitForLine((l) => l.includes('"msg":"background loops started"'));
      const warnings = records(api.lines).filter((r) => Array.isArray(r.unknown));
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatchObject({ level: "warn", unknown: ["9000_from_the_future"] });

      const env = { PLINTH_ENVIRONMENT: "Development", DATABASE_URL: t.url };
      const refused = await runEntry("src/migrate.ts", ["--down"], env);
      expect(refused.exitCode).toBe(5);
      expect(JSON.parse(refused.stdout.trim().split("\n").at(-1) ?? "{}")).toMatchObject({
        level: "error",
        holders: 1,
      });
      const stillApplied = await execute<{ n: number }>(
        t.database.db,
        sql`select count(*)::int as n from schema_migrations where tag = '0001_remove_message_broker'`,
      );
      expect(stillApplied[0]?.n).toBe(1);

      const forced = await runEntry("src/migrate.ts", ["--down", "--force"], env);
      expect(forced.exitCode).toBe(0);
      const after = await ready(port);
      expect(after.status).toBe(503);
      expect(after.body.checks["database:migrations"]?.[0]?.output).toBe(
        "1 migration pending: run `bun run migrate`",
      );
    } finally {
      expect(await api.stop()).toBe(0);
    }
    // stopped: the lock is gone and --down runs without --force (the forced one stepped back the
    // newest migration with a Down step; these the others, the broker's last), until nothing is
    // left with a Down step
    const env2 = { PLINTH_ENVIRONMENT: "Development", DATABASE_URL: t.url };
    const rest = readMigrations()
      .filter((m) => m.down)
      .map((m) => m.tag)
      .reverse()
      .slice(1);
    for (const tag of rest) {
      const down = await runEntry("src/migrate.ts", ["--down"], env2);
      expect(down.exitCode).toBe(0);
      expect(down.stdout).toContain(tag);
    }
    expect(rest.at(-1)).toBe("0001_remove_message_broker");
    const none = await runEntry("src/migrate.ts", ["--down"], env2);
    expect(none.exitCode).toBe(4); // nothing left with a Down step; not refused
  }, 60_000);
});

describe("causes, not symptoms", () => {
  const password = "pw-never-printed-4711";
  const server = new URL(databaseUrl("postgres"));
  const at = (user: string, db: string, port = server.port || "5432") =>
    `postgres://${user}:${password}@${server.hostname}:${port}/${db}`;

  test.each([
    ["database missing", "3D000", at(server.username || "postgres", "no_such_database_15")],
    ["role missing", "28000", at("no_such_role_15", "postgres")],
    ["host unreachable", "ECONNREFUSED", at("postgres", "postgres", "1")],
  ])(
    "%s: start-up and readiness name the class and code, never the password",
    async (cause, code, url) => {
      const api = startApi({ PLINTH_ENVIRONMENT: "Development", DATABASE_URL: url });
      try {
        const port = await api.listening();
        const line = await api.waitForLine((l) => l.includes('"msg":"database check failed"'));
        expect(JSON.parse(line)).toMatchObject({ level: "error", cause, code });
        const probe = await ready(port);
        expect(probe.status).toBe(503);
        expect(probe.body.checks["database:responseTime"]?.[0]?.output).toBe(`${cause} (${code})`);
        expect(probe.body.checks["database:migrations"]?.[0]?.output).toBe(`${cause} (${code})`);
      } finally {
        await api.stop();
      }
      expect(api.lines.join("\n") + api.stderr()).not.toContain(password);
    },
    30_000,
  );
});

test("a loop whose database goes away logs once, naming the cause, and says when it recovers", async () => {
  const t = await database(false);
  const target = new URL(t.url);
  const proxy = await TcpProxy.start({ host: target.hostname, port: Number(target.port || 5432) });
  const url = new URL(t.url);
  url.port = String(proxy.port);
  const api = startApi({
    PLINTH_ENVIRONMENT: "Development",
    DATABASE_URL: url.toString(),
    BackgroundProcessing__JobPollSeconds: "1",
  });
  try {
    await api.listening();
    await api.waitForLine((l) => l.includes('"msg":"background loops started"'));
    proxy.down();
    const failed = await api.waitForLine((l) => l.includes('"msg":"job loop statement failed"'));
    expect(JSON.parse(failed)).toMatchObject({ level: "error", loop: "jobs" });
    expect(JSON.parse(failed).cause).toMatch(/^(host unreachable|connection lost)$/);
    proxy.up();
    const recovered = await api.waitForLine((l) => l.includes('"msg":"job loop statement recovered"'));
    expect(JSON.parse(recovered).failures).toBeGreaterThanOrEqual(1);
    // within the minute: one line for the whole outage, however many rounds failed
    expect(api.lines.filter((l) => l.includes('"msg":"job loop statement failed"'))).toHaveLength(1);
    // the serving lock went with the lost connection; the process takes it again
    await waitFor(async () => (await servingLockHolders(t.database.db)) === 1, {
      what: "the serving lock held again",
      intervalMs: 200,
      timeoutMs: 15_000,
    });
  } finally {
    expect(await api.stop()).toBe(0);
    await proxy.close();
  }
  // five bounded waits in a row (listening, loops, failure, recovery, lock): each has its own limit;
  // the whole may take more than a minute on a loaded 2-core machine
}, 120_000);
