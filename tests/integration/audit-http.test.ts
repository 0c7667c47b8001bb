import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { sql } from "drizzle-orm";
import { z } from "zod";
import { ManualClock } from "../../src/clock.ts";
import { execute } from "../../src/db/client.ts";
import { enqueue } from "../../src/jobs/enqueue.ts";
import { defineJob } from "../../src/jobs/registry.ts";
import { type SmsGateway, startSmsGateway } from "../fixtures/sms-gateway.ts";
import { relaxedLimits, useTestApp } from "../helpers/app.ts";
import {
  bearer,
  createTenant,
  createUser,
  json,
  login,
  loginTokens,
  PASSWORD,
  signedInPlatformAdmin,
  type Tokens,
} from "../helpers/identity.ts";

const clock = new ManualClock("2026-11-23T10:00:00Z");
let sms: SmsGateway;
beforeAll(() => {
  sms = startSmsGateway();
});
afterAll(() => sms.stop());
const app = useTestApp({
  clock,
  settings: relaxedLimits,
  env: () => ({
    Authentication__Sms__Provider: "http",
    Authentication__Sms__HttpUrl: sms.url,
    Authentication__Sms__HttpApiKey: sms.token,
    Authentication__Sms__CodePepper: "p".repeat(40),
    PLINTH_TENANT_SECRET_KEY_ID: "audit-key",
    PLINTH_TENANT_SECRET_MASTER_KEY: randomBytes(32).toString("base64"),
    Audit__FailuresPerMinute: "5",
    Audit__FailuresPerTenantPerMinute: "8",
    Audit__ExportBatchSize: "7",
  }),
});
const db = () => app.testDatabase.database.db;

type Row = {
  id: string;
  tenant_id: string | null;
  actor_type: string;
  actor_id: string | null;
  action: string;
  target_type: string | null;
  target_id: string | null;
  outcome: string;
  client_address: string | null;
  user_agent: string | null;
  request_id: string | null;
  details: Record<string, unknown>;
};
/** The rows of one chain (a tenant id, or null for the platform's), oldest first. */
const eventsOf = (tenantId: string | null, action?: string) =>
  execute<Row>(
    db(),
    sql`select id::text, tenant_id, actor_type, actor_id, action, target_type, target_id, outcome, client_address,
          user_agent, request_id, details
        from audit_events
        where ${tenantId === null ? sql`tenant_id is null` : sql`tenant_id = ${tenantId}`}
          ${action ? sql`and action = ${action}` : sql``}
        order by audit_events.id`,
  );
const actionsOf = async (tenantId: string | null) => (await eventsOf(tenantId)).map((e) => e.action);

let ip = 0;
const peer = () => `10.20.${Math.floor(++ip / 250)}.${ip % 250}`;

async function tenantWithOwner() {
  const tenant = await createTenant(db());
  const owner = await createUser(db(), tenant.id, { role: "owner" });
  return { tenant, owner };
}

let admin: string;
beforeAll(async () => {
  admin = (await signedInPlatformAdmin(app)).accessToken;
});

const adminCall = (path: string, method: string, body?: unknown) =>
  app.request(path, {
    method,
    headers: { authorization: `Bearer ${admin}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });

describe("sign-in, sign-out, password, sessions", () => {
  test("a password sign-in records who, from where, with what, in the tenant's chain", async () => {
    const { tenant, owner } = await tenantWithOwner();
    const address = peer();
    const response = await app.request(
      "/api/auth/login",
      {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "user-agent": "audit-test/1.0",
          "x-request-id": "req-audit-1",
        },
        body: JSON.stringify({ email: owner.email, password: PASSWORD, tenant: tenant.code }),
      },
      address,
    );
    expect(response.status).toBe(200);
    const events = await eventsOf(tenant.id, "auth.sign_in");
    expect(events).toHaveLength(1);
    // issue #29: the row's request id is the one the server gave (the answer's), the client's is apart
    const requestId = response.headers.get("x-request-id");
    expect(requestId).not.toBe("req-audit-1");
    expect(events[0]).toMatchObject({
      actor_type: "user",
      actor_id: owner.id,
      target_type: "session",
      outcome: "success",
      client_address: address,
      user_agent: "audit-test/1.0",
      request_id: requestId,
      details: { method: "password", kind: "token", clientRequestId: "req-audit-1" },
    });
  });

  test("a failed sign-in is recorded as a failure without the password; sign-out; password change; token reuse", async () => {
    const { tenant, owner } = await tenantWithOwner();
    const wrong = await login(
      app,
      { email: owner.email, tenant: tenant.code, password: "not-the-password-9" },
      { peer: peer() },
    );
    expect(wrong.status).toBe(401);
    const [failure] = await eventsOf(tenant.id, "auth.sign_in");
    expect(failure).toMatchObject({
      actor_type: "anonymous",
      actor_id: null,
      outcome: "failure",
      target_id: owner.id,
      details: { method: "password", email: owner.email },
    });
    expect(JSON.stringify(failure)).not.toContain("not-the-password-9");

    const tokens = await loginTokens(app, { email: owner.email, tenant: tenant.code });
    expect((await app.request("/api/auth/logout", json({ refreshToken: tokens.refreshToken }))).status).toBe(
      204,
    );
    const [signOut] = await eventsOf(tenant.id, "auth.sign_out");
    expect(signOut).toMatchObject({ actor_type: "user", actor_id: owner.id, details: { reason: "logout" } });
    // logging out again changes nothing and records nothing
    await app.request("/api/auth/logout", json({ refreshToken: tokens.refreshToken }));
    expect(await eventsOf(tenant.id, "auth.sign_out")).toHaveLength(1);

    const again = await loginTokens(app, { email: owner.email, tenant: tenant.code });
    const changed = await app.request("/api/auth/password", {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${again.accessToken}` },
      body: JSON.stringify({ currentPassword: PASSWORD, newPassword: "a-new-long-password-77" }),
    });
    expect(changed.status).toBe(200);
    const fresh = (await changed.json()) as Tokens;
    const [password] = await eventsOf(tenant.id, "auth.password_changed");
    expect(password).toMatchObject({ actor_id: owner.id, target_type: "user", target_id: owner.id });

    // a refresh token presented twice revokes its session: recorded as such
    const rotated = await app.request("/api/auth/refresh", json({ refreshToken: fresh.refreshToken }));
    expect(rotated.status).toBe(200);
    expect((await app.request("/api/auth/refresh", json({ refreshToken: fresh.refreshToken }))).status).toBe(
      401,
    );
    const [revoked] = await eventsOf(tenant.id, "auth.session_revoked");
    expect(revoked).toMatchObject({
      actor_type: "system",
      actor_id: "auth",
      details: { reason: "refresh token reuse" },
    });
    expect(await actionsOf(tenant.id)).toEqual([
      "user.created",
      "auth.sign_in",
      "auth.sign_in",
      "auth.sign_out",
      "auth.sign_in",
      "auth.password_changed",
      "auth.session_revoked",
    ]);
  });

  test("SMS sign-in: a wrong code is a failure (phone masked), the right one a success", async () => {
    const tenant = await createTenant(db());
    const phone = `+1415555${String(Math.floor(Math.random() * 10_000)).padStart(4, "0")}`;
    const user = await createUser(db(), tenant.id, { phone });
    const address = peer();
    expect(
      (await app.request("/api/auth/sms/send", json({ phone, tenant: tenant.code }), address)).status,
    ).toBe(202);
    await app.deps.pending.settled();
    const code = sms.lastCode(phone) ?? "";
    const wrongCode = code === "000000" ? "111111" : "000000";
    expect(
      (
        await app.request(
          "/api/auth/sms/verify",
          json({ phone, code: wrongCode, tenant: tenant.code }),
          address,
        )
      ).status,
    ).toBe(401);
    expect(
      (await app.request("/api/auth/sms/verify", json({ phone, code, tenant: tenant.code }), address)).status,
    ).toBe(200);
    const events = await eventsOf(tenant.id, "auth.sign_in");
    expect(events.map((e) => [e.outcome, e.details.method, e.actor_id])).toEqual([
      ["failure", "sms", null],
      ["success", "sms", user.id],
    ]);
    expect(JSON.stringify(events[0]?.details)).not.toContain(phone);
    expect(JSON.stringify(events)).not.toContain(code);
  });
});

describe("users, tenants, secrets, providers, domains, billing, jobs, bootstrap", () => {
  test("an owner creates, disables and removes users: one row each, the owner as actor", async () => {
    const { tenant, owner } = await tenantWithOwner();
    const { accessToken } = await loginTokens(app, { email: owner.email, tenant: tenant.code });
    const call = (path: string, method: string, body?: unknown) =>
      app.request(path, {
        method,
        headers: { authorization: `Bearer ${accessToken}`, "content-type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    const created = await call("/api/tenant/users", "POST", {
      email: `new${ip}@example.com`,
      name: "New",
      password: "a-long-test-password-1",
      role: "admin",
    });
    expect(created.status).toBe(201);
    const { id } = (await created.json()) as { id: string };
    expect((await call(`/api/tenant/users/${id}/disable`, "POST")).status).toBe(204);
    expect((await call(`/api/tenant/users/${id}`, "DELETE")).status).toBe(204);
    // a refused change (the last owner) records nothing
    expect((await call(`/api/tenant/users/${owner.id}`, "DELETE")).status).toBe(409);
    const events = (await eventsOf(tenant.id)).filter((e) => e.action.startsWith("user."));
    expect(events.map((e) => [e.action, e.actor_id, e.target_id])).toEqual([
      ["user.created", "identity", owner.id],
      ["user.created", owner.id, id],
      ["user.disabled", owner.id, id],
      ["user.deleted", owner.id, id],
    ]);
    expect(events[1]?.details).toEqual({ role: "admin" });
  });

  test("platform administrators' actions on a tenant land in that tenant's chain", async () => {
    const created = await adminCall("/api/admin/tenants", "POST", { code: `adm${ip++}`, name: "Admin made" });
    expect(created.status).toBe(201);
    const tenantId = ((await created.json()) as { id: string }).id;
    const base = `/api/admin/tenants/${tenantId}`;
    expect(
      (await adminCall(`${base}/secrets/twilio-token`, "PUT", { value: "tw-very-secret-value" })).status,
    ).toBe(204);
    expect((await adminCall(`${base}/secrets/twilio-token`, "DELETE")).status).toBe(204);
    expect(
      (
        await adminCall(`${base}/providers/sms`, "PUT", {
          provider: "http",
          settings: { url: "https://sms.example" },
        })
      ).status,
    ).toBe(200);
    expect((await adminCall(`${base}/providers/sms/disable`, "POST")).status).toBe(200);
    expect(
      (
        await adminCall(`${base}/features/custom_domains/override`, "PUT", {
          enabled: true,
          limit: 3,
          reason: "pilot",
        })
      ).status,
    ).toBe(204);
    expect(
      (await adminCall(`${base}/subscription/events`, "POST", { event: "activate", plan: "pro" })).status,
    ).toBe(200);
    expect(
      (await adminCall(`${base}/domains`, "POST", { hostname: `d${ip}.customer-audit.example` })).status,
    ).toBe(201);
    const domains = (await (await adminCall(`${base}/domains`, "GET")).json()) as { items: { id: string }[] };
    expect((await adminCall(`${base}/domains/${domains.items[0]?.id}`, "DELETE")).status).toBe(204);
    expect((await adminCall(`${base}/suspend`, "POST")).status).toBe(200);
    const events = await eventsOf(tenantId);
    expect(events.map((e) => e.action)).toEqual([
      "tenant.created",
      "tenant_secret.put",
      "tenant_secret.deleted",
      "provider.set",
      "provider.disabled",
      "feature.override",
      "subscription.event",
      "domain.added",
      "domain.removed",
      "tenant.suspended",
    ]);
    const adminId = events[0]?.actor_id;
    expect(events.every((e) => e.actor_type === "user" && e.actor_id === adminId)).toBe(true);
    expect(events[1]?.details).toEqual({ name: "twilio-token" });
    expect(JSON.stringify(events)).not.toContain("tw-very-secret-value");
    expect(events[6]?.details).toMatchObject({ event: "activate", to: "active", plan: "pro" });
    expect(events[5]?.details).toMatchObject({
      feature: "custom_domains",
      value: true,
      count: 3,
      reason: "pilot",
    });
  });

  test("a dead job retried by an admin, and the bootstrap, are platform events", async () => {
    const mail = defineJob("audit.mail", z.object({}), () => {});
    const { id } = await enqueue(db(), { clock }, mail, {});
    await execute(
      db(),
      sql`update background_jobs set status = 'dead', finished_at = now() where id = ${id}`,
    );
    expect((await adminCall(`/api/admin/jobs/${id}/retry`, "POST")).status).toBe(200);
    // a second retry is refused (409): nothing more recorded
    expect((await adminCall(`/api/admin/jobs/${id}/retry`, "POST")).status).toBe(409);
    // the retried job waits again: an admin moves it up the queue
    const moved = await adminCall(`/api/admin/jobs/${id}`, "PATCH", { priority: 5 });
    expect(moved.status).toBe(200);
    // and cancels it
    expect((await adminCall(`/api/admin/jobs/${id}/cancel`, "POST")).status).toBe(200);
    const jobs = (await eventsOf(null)).filter((e) => e.action.startsWith("job."));
    expect(jobs.map((e) => [e.action, e.target_id, e.details])).toEqual([
      ["job.retried", String(id), { count: 1, jobKind: "audit.mail" }],
      ["job.priority_changed", String(id), { count: 1, jobKind: "audit.mail", value: 5 }],
      ["job.canceled", String(id), { count: 1, jobKind: "audit.mail" }],
    ]);
    const platform = await eventsOf(null);
    const [bootstrap] = platform.filter((e) => e.action === "platform.bootstrapped");
    expect(bootstrap).toMatchObject({ actor_type: "system", actor_id: "bootstrap", tenant_id: null });
    expect(platform.filter((e) => e.action === "platform.bootstrapped")).toHaveLength(1);
  });
});

describe("refusals are recorded, rate limited", () => {
  test("a member flooding an owner-only route: at most Audit:FailuresPerMinute rows per address, per-tenant cap across addresses", async () => {
    const { tenant } = await tenantWithOwner();
    const member = await createUser(db(), tenant.id, { role: "member" });
    const { accessToken } = await loginTokens(app, { email: member.email, tenant: tenant.code });
    const flood = async (address: string, n: number) => {
      for (let i = 0; i < n; i++)
        expect((await app.request("/api/tenant/users", bearer(accessToken), address)).status).toBe(403);
    };
    await flood("10.30.0.1", 20);
    let refused = await eventsOf(tenant.id, "authorization.refused");
    expect(refused).toHaveLength(5);
    expect(refused[0]).toMatchObject({
      actor_id: member.id,
      outcome: "denied",
      details: { httpMethod: "GET", path: "/api/tenant/users" },
    });
    // other addresses add up to the tenant's cap (8), not beyond
    await flood("10.30.0.2", 20);
    await flood("10.30.0.3", 20);
    refused = await eventsOf(tenant.id, "authorization.refused");
    expect(refused).toHaveLength(8);
    // what was dropped is marked in the chain: the first drop of each address, and of the full tenant
    const marks = await eventsOf(tenant.id, "audit.rows_suppressed");
    expect(marks.map((e) => [e.client_address, e.outcome, e.details])).toEqual([
      ["10.30.0.1", "denied", { action: "authorization.refused", limit: "address", perMinute: 5 }],
      ["10.30.0.2", "denied", { action: "authorization.refused", limit: "tenant", perMinute: 8 }],
      ["10.30.0.2", "denied", { action: "authorization.refused", limit: "address", perMinute: 5 }],
      ["10.30.0.3", "denied", { action: "authorization.refused", limit: "address", perMinute: 5 }],
    ]);
    expect(marks[0]?.actor_id).toBe(member.id);
    // a minute later the windows have room again
    clock.advance(61_000);
    await flood("10.30.0.1", 3);
    expect(await eventsOf(tenant.id, "authorization.refused")).toHaveLength(11);
  });

  test("a flood of failed sign-ins writes a bounded number of rows", async () => {
    const { tenant } = await tenantWithOwner();
    let unauthorized = 0;
    for (let i = 0; i < 30; i++) {
      const response = await login(
        app,
        { email: `ghost${i}@example.com`, tenant: tenant.code, password: "wrong-password-xyz" },
        { peer: "10.31.0.1" },
      );
      if (response.status === 401) unauthorized++;
    }
    expect(unauthorized).toBeGreaterThan(5);
    expect(await eventsOf(tenant.id, "auth.sign_in")).toHaveLength(5);
  });
});

describe("reading the log", () => {
  let a: { tenant: { id: string; code: string }; owner: { id: string; email: string } };
  let b: { tenant: { id: string; code: string }; owner: { id: string; email: string } };
  let ownerA: string;
  beforeAll(async () => {
    a = await tenantWithOwner();
    b = await tenantWithOwner();
    ownerA = (await loginTokens(app, { email: a.owner.email, tenant: a.tenant.code })).accessToken;
    await loginTokens(app, { email: b.owner.email, tenant: b.tenant.code });
    for (let i = 0; i < 8; i++) await createUser(db(), a.tenant.id);
  });
  type Page = {
    items: { id: string; tenantId: string; action: string; actor: { id: string } }[];
    nextCursor: string | null;
  };
  const list = async (query: string, token = ownerA) => {
    const response = await app.request(`/api/tenant/audit-events${query}`, bearer(token));
    expect(response.status).toBe(200);
    return (await response.json()) as Page;
  };

  test("a tenant sees only its own events, newest first, a page at a time", async () => {
    const all = await list("?limit=200");
    const own = await eventsOf(a.tenant.id);
    expect(all.items.map((e) => e.id)).toEqual(own.map((e) => e.id).reverse());
    expect(all.items.every((e) => e.tenantId === a.tenant.id)).toBe(true);
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page: Page = await list(`?limit=3${cursor ? `&cursor=${cursor}` : ""}`);
      seen.push(...page.items.map((e) => e.id));
      cursor = page.nextCursor;
    } while (cursor);
    expect(seen).toEqual(all.items.map((e) => e.id));
    // tenant B's owner sees none of A's
    const ownerB = (await loginTokens(app, { email: b.owner.email, tenant: b.tenant.code })).accessToken;
    const other = await list("?limit=200", ownerB);
    expect(other.items.some((e) => e.tenantId !== b.tenant.id)).toBe(false);
    expect(other.items.length).toBeGreaterThan(0);
  });

  test("filters: action, actor, target, time range; bad ones are 400", async () => {
    const signIns = await list("?action=auth.sign_in");
    expect(signIns.items.map((e) => e.action)).toEqual(["auth.sign_in"]);
    const byOwner = await list(`?actor=${a.owner.id}`);
    expect(byOwner.items.length).toBeGreaterThan(0);
    expect(byOwner.items.every((e) => e.actor.id === a.owner.id)).toBe(true);
    const target = await list(`?targetType=user&targetId=${a.owner.id}`);
    expect(target.items.map((e) => e.action)).toEqual(["user.created"]);
    expect((await list("?from=2000-01-01T00:00:00Z&to=2001-01-01T00:00:00Z")).items).toEqual([]);
    expect(
      (await list(`?from=2000-01-01T00:00:00Z&to=${new Date(Date.now() + 3_600_000).toISOString()}`)).items
        .length,
    ).toBe((await list("?limit=200")).items.length);
    for (const bad of ["?from=yesterday", "?cursor=abc", "?limit=0"])
      expect((await app.request(`/api/tenant/audit-events${bad}`, bearer(ownerA))).status).toBe(400);
  });

  test("members get 403; platform admins read any chain through the admin route", async () => {
    const member = await createUser(db(), a.tenant.id, { role: "member" });
    const { accessToken } = await loginTokens(app, { email: member.email, tenant: a.tenant.code });
    expect((await app.request("/api/tenant/audit-events", bearer(accessToken))).status).toBe(403);
    expect((await app.request("/api/admin/audit-events", bearer(ownerA))).status).toBe(403);
    const response = await app.request(
      `/api/admin/audit-events?tenantId=${b.tenant.id}&limit=200`,
      bearer(admin),
    );
    expect(response.status).toBe(200);
    const page = (await response.json()) as Page;
    expect(page.items.map((e) => e.id)).toEqual((await eventsOf(b.tenant.id)).map((e) => e.id).reverse());
    const platform = (await (
      await app.request("/api/admin/audit-events?tenantId=platform&limit=200", bearer(admin))
    ).json()) as Page;
    expect(platform.items.length).toBeGreaterThan(0);
    expect(platform.items.every((e) => e.tenantId === null)).toBe(true);
  });

  test("NDJSON export: every matching event, oldest first, one per line, read in batches", async () => {
    const response = await app.request("/api/tenant/audit-events", {
      headers: { authorization: `Bearer ${ownerA}`, accept: "application/x-ndjson" },
    });
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toBe("application/x-ndjson");
    const lines = (await response.text()).trim().split("\n");
    const all = await eventsOf(a.tenant.id);
    // the export's own row (audit.exported, written as it starts) is the newest and not in it
    expect(all.at(-1)?.action).toBe("audit.exported");
    const own = all.slice(0, -1);
    // more rows than one batch (Audit:ExportBatchSize is 7 here): the batches join without a gap
    expect(own.length).toBeGreaterThan(7);
    expect(lines.map((line) => (JSON.parse(line) as { id: string }).id)).toEqual(own.map((e) => e.id));
    const filtered = await app.request("/api/tenant/audit-events?action=user.created", {
      headers: { authorization: `Bearer ${ownerA}`, accept: "application/x-ndjson" },
    });
    const created = (await filtered.text())
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as { action: string });
    // a time range: only the events in it, still oldest first
    const [middle] = await execute<{ at: string }>(
      db(),
      sql`select to_char(occurred_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as at from audit_events
          where tenant_id = ${a.tenant.id} order by audit_events.id offset 4 limit 1`,
    );
    const inRange = await execute<{ id: string }>(
      db(),
      sql`select id::text from audit_events where tenant_id = ${a.tenant.id} and occurred_at >= ${middle?.at}::timestamptz
          order by audit_events.id`,
    );
    const ranged = await app.request(`/api/tenant/audit-events?from=${middle?.at}`, {
      headers: { authorization: `Bearer ${ownerA}`, accept: "application/x-ndjson" },
    });
    const rangedIds = (await ranged.text())
      .trim()
      .split("\n")
      .map((line) => (JSON.parse(line) as { id: string }).id);
    expect(rangedIds).toEqual(inRange.map((r) => r.id));
    expect(rangedIds.length).toBeLessThan(own.length);
    const expected = await eventsOf(a.tenant.id, "user.created");
    expect(expected.length).toBeGreaterThanOrEqual(6);
    expect(created.map((e) => e.action)).toEqual(expected.map((e) => e.action));
  });
});
