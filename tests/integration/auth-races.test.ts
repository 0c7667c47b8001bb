import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import postgres from "postgres";
import { ManualClock } from "../../src/clock.ts";
import { hashPassword } from "../../src/security/passwords.ts";
import { createTestApp, relaxedLimits, settingsEnv, useTestApp } from "../helpers/app.ts";
import { bearer, createTenant, createUser, login, loginTokens } from "../helpers/identity.ts";

let other: postgres.Sql;
const clock = new ManualClock();

afterAll(() => other.end());
const app = useTestApp({ clock, settings: relaxedLimits });
const t = app.testDatabase;
beforeAll(() => {
  other = postgres(t.url, { max: 2, onnotice: () => {} });
});

const peer = () => `10.7.${Math.floor(Math.random() * 250)}.${Math.floor(Math.random() * 250)}`;

/** Polls until a backend of the test database waits on a lock: the sign-in reached the user row. */
async function someoneWaitsOnALock(): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    const rows = await other`select 1 from pg_stat_activity
      where datname = ${t.name} and wait_event_type = 'Lock'`;
    if (rows.length > 0) return;
    await Bun.sleep(5);
  }
  throw new Error("no sign-in ever waited on the user row");
}

describe("a sign-in racing a change of the user row", () => {
  const changes = {
    "a password change": async (sql: postgres.TransactionSql, userId: string) => {
      const hash = await hashPassword("a-brand-new-password-2");
      await sql`update users set password_hash = ${hash}, password_changed_at = now() where id = ${userId}`;
      await sql`update sessions set revoked_at = now(), revoked_reason = 'password changed'
        where user_id = ${userId} and revoked_at is null`;
    },
    "disabling the user": async (sql: postgres.TransactionSql, userId: string) => {
      await sql`update users set status = 'Disabled' where id = ${userId}`;
      await sql`update sessions set revoked_at = now(), revoked_reason = 'user disabled'
        where user_id = ${userId} and revoked_at is null`;
    },
  };

  for (const [name, change] of Object.entries(changes)) {
    test(`a login that verified the old row before ${name} committed gets 401 and no session`, async () => {
      const tenant = await createTenant(t.database.db);
      const user = await createUser(t.database.db, tenant.id);
      let signIn: Promise<Response> | undefined;
      // the change holds the user row (as changePassword / disableTenantUser do) while the login runs
      await other.begin(async (sql) => {
        await change(sql, user.id);
        signIn = login(app, { email: user.email, tenant: tenant.code }, { peer: peer() });
        await someoneWaitsOnALock();
      });
      const response = await (signIn as Promise<Response>);
      expect(response.status).toBe(401);
      const open = await other`select id from sessions where user_id = ${user.id} and revoked_at is null`;
      expect(open.length).toBe(0);
    });
  }

  test("a login that commits its session first is revoked by the password change that follows", async () => {
    const tenant = await createTenant(t.database.db);
    const user = await createUser(t.database.db, tenant.id);
    const response = await login(app, { email: user.email, tenant: tenant.code }, { peer: peer() });
    expect(response.status).toBe(200);
    await other.begin((sql) => changes["a password change"](sql, user.id));
    const open = await other`select id from sessions where user_id = ${user.id} and revoked_at is null`;
    expect(open.length).toBe(0);
  });
});

describe("a tenant keeps an active owner under concurrency", () => {
  const actions = {
    disable: (id: string) => ({ path: `/api/tenant/users/${id}/disable`, method: "POST" }),
    remove: (id: string) => ({ path: `/api/tenant/users/${id}`, method: "DELETE" }),
  };
  for (const [first, second] of [
    ["disable", "disable"],
    ["remove", "remove"],
    ["disable", "remove"],
  ] as const) {
    test(`two owners: ${first} and ${second} each other at once; exactly one succeeds`, async () => {
      for (let round = 0; round < 5; round++) {
        const tenant = await createTenant(t.database.db);
        const a = await createUser(t.database.db, tenant.id, { role: "owner" });
        const b = await createUser(t.database.db, tenant.id, { role: "owner" });
        const tokenA = (await loginTokens(app, { email: a.email, tenant: tenant.code })).accessToken;
        const tokenB = (await loginTokens(app, { email: b.email, tenant: tenant.code })).accessToken;
        const request = (token: string, action: { path: string; method: string }) =>
          app.request(action.path, { method: action.method, ...bearer(token) });
        const statuses = (
          await Promise.all([request(tokenA, actions[first](b.id)), request(tokenB, actions[second](a.id))])
        ).map((r) => r.status);
        // the loser is refused (409), or finds its own session already ended (401)
        expect(statuses.filter((s) => s === 204).length).toBe(1);
        const owners = await other`select count(*)::int as n from tenant_memberships m
          join users u on u.id = m.user_id
          where m.tenant_id = ${tenant.id} and m.role = 'owner' and u.status = 'Active'`;
        expect(owners[0]?.n).toBe(1);
      }
    });
  }
});

describe("the per-IP password window under parallel guesses", () => {
  test("parallel wrong logins from one IP: at most IpAttemptLimit get 401, the rest 429; successes do not count", async () => {
    const strict = await createTestApp({
      database: t.database,
      clock,
      env: { ...settingsEnv(relaxedLimits), Authentication__Password__IpAttemptLimit: "3" },
    });
    const tenant = await createTenant(t.database.db);
    const office = peer();
    const colleagues = await Promise.all(
      Array.from({ length: 6 }, () => createUser(t.database.db, tenant.id)),
    );
    // successes give their permit back: three at once (the limit), then more one by one
    const together = await Promise.all(
      colleagues
        .slice(0, 3)
        .map((u) => login(strict, { email: u.email, tenant: tenant.code }, { peer: office })),
    );
    expect(together.map((r) => r.status)).toEqual([200, 200, 200]);
    for (const u of colleagues.slice(3)) {
      expect((await login(strict, { email: u.email, tenant: tenant.code }, { peer: office })).status).toBe(
        200,
      );
    }
    const guesses = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        login(
          strict,
          { email: `guess${i}@example.com`, password: "wrong-password-123", tenant: tenant.code },
          { peer: office },
        ),
      ),
    );
    const statuses = guesses.map((r) => r.status);
    expect(statuses.filter((s) => s === 401).length).toBe(3);
    expect(statuses.filter((s) => s === 429).length).toBe(17);
    // another address is not affected
    expect(
      (await login(strict, { email: colleagues[0]?.email ?? "", tenant: tenant.code }, { peer: peer() }))
        .status,
    ).toBe(200);
  });
});
