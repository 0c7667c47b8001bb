import { afterAll, describe, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { execute } from "../../src/db/client.ts";
import { readMigrations, servingLockHolders } from "../../src/db/migrator.ts";
import { records, startApi } from "../helpers/api-process.ts";
import { stopChildrenAfterAll } from "../helpers/children.ts";
import { createTestDatabase, databaseUrl, type TestDatabase } from "../helpers/database.ts";
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

describe("a role row-level security holds", () => {
  const appRoleUrl = async () => {
    const url = new URL((await database(false)).url);
    url.username = "plinth_app"; // made and granted by the migrator (and the test template)
    url.password = "";
    return url.toString();
  };

  test("Production refuses to start as it, naming the role, until every read carries the tenant context", async () => {
    const api = startApi(validProductionEnv({ DATABASE_URL: await appRoleUrl() }));
    expect(await api.proc.exited).toBe(1);
    const line = await api.waitForLine((l) => l.includes("row-level security holds"));
    expect(JSON.parse(line)).toMatchObject({ level: "error", role: "plinth_app" });
    expect(api.lines.some((l) => l.includes('"msg":"listening"'))).toBe(false);
  });

  test("Development serves as it with a warning naming the role (how the paths still without a context are found)", async () => {
    const api = startApi({ PLINTH_ENVIRONMENT: "Development", DATABASE_URL: await appRoleUrl() });
    await api.listening();
    const line = await api.waitForLine((l) => l.includes("row-level security holds"));
    expect(JSON.parse(line)).toMatchObject({ level: "warn", role: "plinth_app", environment: "Development" });
    api.proc.kill();
    await api.proc.exited;
  });
});

describe("behind: migrations pending", () => {
  test("Production refuses to start, naming them", async () => {
    const t = await database(true);
    const api = startApi(validProductionEnv({ DATABASE_URL: t.url }));
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
  const api = startApi(validProductionEnv({ DATABASE_URL: t.url }), ["--migrate"]);
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
