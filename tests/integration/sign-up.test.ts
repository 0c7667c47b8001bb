import { expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import { decodeJwt } from "jose";
import { ManualClock } from "../../src/clock.ts";
import { tenants, users } from "../../src/db/schema/index.ts";
import { createTestApp, relaxedLimits, testConfig } from "../helpers/app.ts";
import { bearer, json } from "../helpers/identity.ts";
import { tokenOf, useMailTestApp } from "../helpers/mailed-links.ts";

// Issue #32 point 5: self-serve sign-up; the tenant and its owner exist only once the address is
// verified with the link read back from a real SMTP server.

const clock = new ManualClock(new Date());
const { h, deliverLinks } = useMailTestApp({
  clock,
  settings: { "Tenancy:SignUp:Enabled": "true", "Tenancy:SignUp:DomainLimit": "3" },
});

const PASSWORD = "saffron-meadow-kettle-93";

const code = () => `su${crypto.randomUUID().slice(0, 8)}`;
const signUp = (body: Record<string, string>, peer?: string) =>
  h.request("/api/auth/signup", json(body), peer);

test("the tenant and its owner exist only after the link is followed; the link works once", async () => {
  const email = `founder${crypto.randomUUID().slice(0, 6)}@startup.example`;
  const tenantCode = code();
  const asked = await signUp({ email, name: "Fay", password: PASSWORD, tenantCode, tenantName: "Startup" });
  expect(asked.status).toBe(202);
  expect(await h.db.select().from(tenants).where(eq(tenants.code, tenantCode))).toEqual([]);
  expect(await h.db.select().from(users).where(eq(users.email, email))).toEqual([]);
  const [link] = await deliverLinks(email);
  expect(link).toStartWith("https://app.plinth.test/auth/sign-up/verify?token=");
  const token = tokenOf(link ?? "");
  const done = await h.request("/api/auth/signup/verify", json({ token }));
  expect(done.status).toBe(200);
  const pair = (await done.json()) as { accessToken: string };
  const [tenant] = await h.db.select().from(tenants).where(eq(tenants.code, tenantCode));
  expect(tenant?.name).toBe("Startup");
  expect((decodeJwt(pair.accessToken) as { tid: string; roles: string[] }).tid).toBe(tenant?.id ?? "");
  const me = (await (await h.request("/api/auth/me", bearer(pair.accessToken))).json()) as {
    roles: string[];
    memberships: { tenant: { code: string }; role: string }[];
  };
  expect(me.roles).toEqual(["owner"]);
  expect(me.memberships.map((m) => [m.tenant.code, m.role])).toEqual([[tenantCode, "owner"]]);
  // the owner signs in with the password of the request
  const login = await h.request("/api/auth/login", json({ email, password: PASSWORD, tenant: tenantCode }));
  expect(login.status).toBe(200);
  // once only
  expect((await h.request("/api/auth/signup/verify", json({ token }))).status).toBe(404);
});

test("202 alike for a taken code and an address with an account; the taken code is 409 only on the link", async () => {
  const first = `a${crypto.randomUUID().slice(0, 6)}@one.example`;
  const tenantCode = code();
  await signUp({ email: first, name: "A", password: PASSWORD, tenantCode, tenantName: "One" });
  const [firstLink] = await deliverLinks(first);
  expect((await h.request("/api/auth/signup/verify", json({ token: tokenOf(firstLink ?? "") }))).status).toBe(
    200,
  );
  // the same code again, and the same address for a new code: both 202
  const second = `b${crypto.randomUUID().slice(0, 6)}@two.example`;
  const taken = await signUp({ email: second, name: "B", password: PASSWORD, tenantCode, tenantName: "Two" });
  const again = await signUp({
    email: first,
    name: "A",
    password: PASSWORD,
    tenantCode: code(),
    tenantName: "Three",
  });
  expect([taken.status, again.status]).toEqual([202, 202]);
  const [takenLink] = await deliverLinks(second);
  expect((await h.request("/api/auth/signup/verify", json({ token: tokenOf(takenLink ?? "") }))).status).toBe(
    409,
  );
  // the existing address owns a second tenant with its one sign-in
  const [againLink] = await deliverLinks(first);
  const owned = await h.request("/api/auth/signup/verify", json({ token: tokenOf(againLink ?? "") }));
  expect(owned.status).toBe(200);
  const me = (await (
    await h.request("/api/auth/me", bearer(((await owned.json()) as { accessToken: string }).accessToken))
  ).json()) as { memberships: unknown[] };
  expect(me.memberships).toHaveLength(2);
});

test("abuse limits: per address domain and per client", async () => {
  const domain = `d${crypto.randomUUID().slice(0, 6)}.example`;
  const statuses: number[] = [];
  for (let i = 0; i < 4; i++)
    statuses.push(
      (
        await signUp(
          { email: `x${i}@${domain}`, name: "X", password: PASSWORD, tenantCode: code(), tenantName: "X" },
          `10.77.0.${i + 1}`,
        )
      ).status,
    );
  expect(statuses).toEqual([202, 202, 202, 429]);
});

test("off by default: 404", async () => {
  const off = await createTestApp({
    database: h.testDatabase.database,
    config: testConfig({ settings: relaxedLimits }),
  });
  try {
    const response = await off.request(
      "/api/auth/signup",
      json({ email: "z@example.com", name: "Z", password: PASSWORD, tenantCode: code(), tenantName: "Z" }),
    );
    expect(response.status).toBe(404);
  } finally {
    await off.close();
  }
});
