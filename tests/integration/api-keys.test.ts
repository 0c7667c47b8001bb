import { expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import { apiKeyHash } from "../../src/api-keys/format.ts";
import { markApiKeyUsed } from "../../src/api-keys/keys.ts";
import { ManualClock } from "../../src/clock.ts";
import { systemCtx } from "../../src/context.ts";
import { apiKeys } from "../../src/db/schema/index.ts";
import { suspendTenant } from "../../src/tenancy/tenants.ts";
import { relaxedLimits, useTestApp } from "../helpers/app.ts";
import { activeDomain, json, signedInTenant } from "../helpers/identity.ts";

const clock = new ManualClock(Date.now());
const app = useTestApp({
  clock,
  cache: "apikeys",
  settings: relaxedLimits,
  env: {
    RateLimiting__ApiKey__PermitLimit: "20",
    RateLimiting__ApiKey__WindowSeconds: "60",
  },
});

const KEY = /^plk_[0-9A-Za-z]{12}_[0-9A-Za-z]{32}$/;

interface Issued {
  id: string;
  key: string;
  prefix: string;
  scopes: string[];
  createdBy: string | null;
  status: string;
  previousKeyExpiresAt: string | null;
}
interface Listed {
  id: string;
  name: string;
  createdBy: string | null;
  prefix: string;
  lastUsedAt: string | null;
  lastUsedIp: string | null;
  status: string;
  revokedAt: string | null;
}

const withKey = (key: string, extra: Record<string, string> = {}) => ({
  authorization: `Bearer ${key}`,
  ...extra,
});

async function createKey(
  auth: Record<string, string>,
  body: { name?: string; scopes: string[]; expiresAt?: string },
): Promise<Issued> {
  const response = await app.request("/api/tenant/api-keys", json({ name: "integration", ...body }, auth));
  if (response.status !== 201) throw new Error(`create failed: ${response.status} ${await response.text()}`);
  return (await response.json()) as Issued;
}

const get = (path: string, headers: Record<string, string>, peer?: string) =>
  app.request(path, { headers }, peer);

async function listed(auth: Record<string, string>): Promise<Listed[]> {
  const response = await get("/api/tenant/api-keys", auth);
  expect(response.status).toBe(200);
  return ((await response.json()) as { items: Listed[] }).items;
}

test("an owner creates a key: shown once (no-store), stored only as its SHA-256, listed without it", async () => {
  const t = await signedInTenant(app);
  const created = await app.request(
    "/api/tenant/api-keys",
    json({ name: "ci", scopes: ["users:read"] }, t.owner.headers),
  );
  expect(created.status).toBe(201);
  expect(created.headers.get("cache-control")).toBe("no-store");
  const issued = (await created.json()) as Issued;
  expect(issued.key).toMatch(KEY);
  expect(issued.key.startsWith(`${issued.prefix}_`)).toBe(true);
  expect(issued.createdBy).toBe(t.owner.id);
  expect(issued.status).toBe("active");
  const [row] = await app.db.select().from(apiKeys).where(eq(apiKeys.id, issued.id));
  expect(row?.secretHash).toBe(apiKeyHash(issued.key));
  expect(JSON.stringify(row)).not.toContain(issued.key.slice(issued.prefix.length + 1));
  const response = await get("/api/tenant/api-keys", t.owner.headers);
  const text = await response.text();
  expect(text).not.toContain(issued.key);
  expect(text).not.toContain(issued.key.slice(issued.prefix.length + 1));
  expect(text).not.toContain(apiKeyHash(issued.key));
  const items = (JSON.parse(text) as { items: Listed[] }).items;
  expect(items.map((k) => [k.name, k.prefix, k.status])).toEqual([["ci", issued.prefix, "active"]]);
});

test("owners and admins manage keys; members get 403; bad input 400", async () => {
  const t = await signedInTenant(app);
  expect((await createKey(t.admin.headers, { scopes: ["domains:*"] })).status).toBe("active");
  const byMember = await app.request(
    "/api/tenant/api-keys",
    json({ name: "m", scopes: ["users:read"] }, t.member.headers),
  );
  expect(byMember.status).toBe(403);
  expect((await get("/api/tenant/api-keys", t.member.headers)).status).toBe(403);
  for (const body of [
    { name: "x", scopes: [] },
    { name: "x", scopes: ["admin:*"] },
    { name: "x", scopes: ["users:read", "users:read"] },
    { name: "", scopes: ["users:read"] },
    { name: "x", scopes: ["users:read"], expiresAt: new Date(clock.now().getTime() - 1000).toISOString() },
  ]) {
    const response = await app.request("/api/tenant/api-keys", json(body, t.owner.headers));
    expect(response.status).toBe(400);
  }
});

test("a key works on the routes its scopes allow, 403 on the others, 401 on admin routes, 403 on key and password routes", async () => {
  const t = await signedInTenant(app);
  const reader = (await createKey(t.owner.headers, { scopes: ["users:read"] })).key;
  expect((await get("/api/tenant/users", withKey(reader))).status).toBe(200);
  expect((await get("/api/tenant/features", withKey(reader))).status).toBe(200);
  for (const [method, path] of [
    ["POST", "/api/tenant/users"],
    ["GET", "/api/tenant/domains"],
    ["GET", "/api/tenant/storage/objects"],
    ["GET", "/api/tenant/api-keys"],
    ["POST", "/api/tenant/api-keys"],
  ] as const) {
    const response = await app.request(
      path,
      method === "GET" ? { headers: withKey(reader) } : json({}, withKey(reader)),
    );
    expect(`${method} ${path} ${response.status}`).toBe(`${method} ${path} 403`);
    expect(((await response.json()) as { code: string }).code).toBe("forbidden");
  }
  const admin = await get("/api/admin/tenants", withKey(reader));
  expect(admin.status).toBe(401);
  expect(admin.headers.get("www-authenticate")).toBe('Bearer realm="plinth"');
  for (const [method, path] of [
    ["GET", "/api/auth/me"],
    ["POST", "/api/auth/password"],
  ] as const) {
    const response = await app.request(
      path,
      method === "GET"
        ? { headers: withKey(reader) }
        : json({ currentPassword: "x", newPassword: "y" }, withKey(reader)),
    );
    expect(`${method} ${path} ${response.status}`).toBe(`${method} ${path} 403`);
  }

  // users:admin with a member's reach adds members (never an admin or an owner: a key never makes a
  // principal with more power than itself; tests/integration/api-key-reach.test.ts); domains:* reads domains
  const writer = (await createKey(t.owner.headers, { scopes: ["users:admin", "storage:*", "domains:*"] }))
    .key;
  const newUser = (role: string) => ({
    email: `k${crypto.randomUUID().slice(0, 8)}@example.com`,
    name: "By Key",
    password: "a long and unusual passphrase 7",
    role,
  });
  expect((await app.request("/api/tenant/users", json(newUser("member"), withKey(writer)))).status).toBe(201);
  expect((await app.request("/api/tenant/users", json(newUser("owner"), withKey(writer)))).status).toBe(403);
  expect((await get("/api/tenant/users", withKey(writer))).status).toBe(403);
  expect((await get("/api/tenant/domains", withKey(writer))).status).toBe(200);
  // even a key holding every scope manages no keys (the free plan holds two keys: one goes first)
  const readerId = (await listed(t.owner.headers))[0]?.id;
  await app.request(`/api/tenant/api-keys/${readerId}`, { method: "DELETE", headers: t.owner.headers });
  const all = (
    await createKey(t.admin.headers, { scopes: ["users:*", "domains:*", "storage:*", "webhooks:*"] })
  ).key;
  expect((await get("/api/tenant/api-keys", withKey(all))).status).toBe(403);
});

test('revoked, expired, wrong or malformed keys get 401 with error="invalid_token"', async () => {
  const t = await signedInTenant(app);
  const revoked = await createKey(t.owner.headers, { scopes: ["users:read"] });
  expect((await get("/api/tenant/users", withKey(revoked.key))).status).toBe(200);
  expect(
    (await app.request(`/api/tenant/api-keys/${revoked.id}`, { method: "DELETE", headers: t.owner.headers }))
      .status,
  ).toBe(204);
  // revoking twice is a no-op
  expect(
    (await app.request(`/api/tenant/api-keys/${revoked.id}`, { method: "DELETE", headers: t.owner.headers }))
      .status,
  ).toBe(204);
  const expiring = await createKey(t.owner.headers, {
    scopes: ["users:read"],
    expiresAt: new Date(clock.now().getTime() + 60_000).toISOString(),
  });
  expect((await get("/api/tenant/users", withKey(expiring.key))).status).toBe(200);
  clock.advance(61_000);
  const wrongSecret = `${revoked.prefix}_${"A".repeat(32)}`;
  for (const [key, detail] of [
    [revoked.key, "The API key has been revoked."],
    [expiring.key, "The API key has expired."],
    [wrongSecret, "Invalid API key."],
    [`plk_${"B".repeat(12)}_${"C".repeat(32)}`, "Invalid API key."],
    ["plk_short", "Malformed API key."],
  ] as const) {
    const response = await get("/api/tenant/users", withKey(key));
    expect(response.status).toBe(401);
    expect(response.headers.get("www-authenticate")).toContain('error="invalid_token"');
    expect(((await response.json()) as { detail: string }).detail).toBe(detail);
  }
  const states = Object.fromEntries((await listed(t.owner.headers)).map((k) => [k.id, k.status]));
  expect(states).toEqual({ [revoked.id]: "revoked", [expiring.id]: "expired" });
});

test("roll: the new secret works at once, the old one for the grace period; 0 ends it at once", async () => {
  const t = await signedInTenant(app);
  const issued = await createKey(t.owner.headers, { scopes: ["users:read"] });
  const rollOf = (id: string, body: object) =>
    app.request(`/api/tenant/api-keys/${id}/roll`, json(body, t.owner.headers));
  const rolledResponse = await rollOf(issued.id, { gracePeriodSeconds: 30 });
  expect(rolledResponse.status).toBe(200);
  const rolled = (await rolledResponse.json()) as Issued;
  expect(rolled.key).toMatch(KEY);
  expect(rolled.key).not.toBe(issued.key);
  expect(rolled.prefix).toBe(issued.prefix);
  expect(rolled.previousKeyExpiresAt).toBe(new Date(clock.now().getTime() + 30_000).toISOString());
  expect((await get("/api/tenant/users", withKey(rolled.key))).status).toBe(200);
  expect((await get("/api/tenant/users", withKey(issued.key))).status).toBe(200);
  clock.advance(31_000);
  expect((await get("/api/tenant/users", withKey(issued.key))).status).toBe(401);
  expect((await get("/api/tenant/users", withKey(rolled.key))).status).toBe(200);

  // the default grace is 24 h; a second roll with 0 ends both earlier secrets now
  const defaulted = (await (await rollOf(issued.id, {})).json()) as Issued;
  expect(defaulted.previousKeyExpiresAt).toBe(new Date(clock.now().getTime() + 86_400_000).toISOString());
  expect((await get("/api/tenant/users", withKey(rolled.key))).status).toBe(200);
  const final = (await (await rollOf(issued.id, { gracePeriodSeconds: 0 })).json()) as Issued;
  expect(final.previousKeyExpiresAt).toBeNull();
  for (const old of [issued.key, rolled.key, defaulted.key])
    expect((await get("/api/tenant/users", withKey(old))).status).toBe(401);
  expect((await get("/api/tenant/users", withKey(final.key))).status).toBe(200);

  expect((await rollOf(issued.id, { gracePeriodSeconds: -1 })).status).toBe(400);
  await app.request(`/api/tenant/api-keys/${issued.id}`, { method: "DELETE", headers: t.owner.headers });
  expect((await rollOf(issued.id, {})).status).toBe(409);
  expect((await rollOf(crypto.randomUUID(), {})).status).toBe(404);
});

test("a revocation whose notice is lost still takes effect once the one-second cache entry ends", async () => {
  const t = await signedInTenant(app);
  const issued = await createKey(t.owner.headers, { scopes: ["users:read"] });
  expect((await get("/api/tenant/users", withKey(issued.key))).status).toBe(200);
  // behind the app's back: no notice
  await app.db.update(apiKeys).set({ revokedAt: clock.now() }).where(eq(apiKeys.id, issued.id));
  expect((await get("/api/tenant/users", withKey(issued.key))).status).toBe(200);
  clock.advance(1_000);
  expect((await get("/api/tenant/users", withKey(issued.key))).status).toBe(401);
});

test("tenant isolation: another tenant neither sees, revokes nor rolls a key, and a key reads only its tenant", async () => {
  const a = await signedInTenant(app);
  const b = await signedInTenant(app);
  const issued = await createKey(a.owner.headers, { scopes: ["users:read"] });
  expect(await listed(b.owner.headers)).toEqual([]);
  expect(
    (await app.request(`/api/tenant/api-keys/${issued.id}`, { method: "DELETE", headers: b.owner.headers }))
      .status,
  ).toBe(404);
  expect(
    (await app.request(`/api/tenant/api-keys/${issued.id}/roll`, json({}, b.owner.headers))).status,
  ).toBe(404);
  expect((await get("/api/tenant/users", withKey(issued.key))).status).toBe(200);
  const users = (await (await get("/api/tenant/users", withKey(issued.key))).json()) as {
    items: { id: string }[];
  };
  expect(users.items.map((u) => u.id).sort()).toEqual([a.owner.id, a.admin.id, a.member.id].sort());
  // on tenant B's own host, tenant A's key finds nothing (404), as a token of A would; on A's, it works
  const hostA = await activeDomain(app.db, a.id, `keys-${a.code}.example.com`);
  const hostB = await activeDomain(app.db, b.id, `keys-${b.code}.example.com`);
  expect((await get(`http://${hostB}/api/tenant/users`, withKey(issued.key))).status).toBe(404);
  expect((await get(`http://${hostA}/api/tenant/users`, withKey(issued.key))).status).toBe(200);
});

test("last use: recorded with the address, at most once a minute per key, shown in the list", async () => {
  const t = await signedInTenant(app);
  const issued = await createKey(t.owner.headers, { scopes: ["users:read"] });
  const lastUse = async () => {
    await app.deps.pending.settled(5_000);
    return (await listed(t.owner.headers)).find((k) => k.id === issued.id);
  };
  expect((await lastUse())?.lastUsedAt).toBeNull();
  const first = clock.now().toISOString();
  expect((await get("/api/tenant/users", withKey(issued.key), "203.0.113.7")).status).toBe(200);
  expect(await lastUse()).toMatchObject({ lastUsedAt: first, lastUsedIp: "203.0.113.7" });
  clock.advance(30_000);
  for (let i = 0; i < 5; i++) await get("/api/tenant/users", withKey(issued.key), "203.0.113.8");
  expect(await lastUse()).toMatchObject({ lastUsedAt: first, lastUsedIp: "203.0.113.7" });
  clock.advance(31_000);
  const second = clock.now().toISOString();
  await get("/api/tenant/users", withKey(issued.key), "203.0.113.9");
  expect(await lastUse()).toMatchObject({ lastUsedAt: second, lastUsedIp: "203.0.113.9" });
});

test("per-key rate limit: 429 with the RateLimit fields, whatever the address; other keys unaffected", async () => {
  const t = await signedInTenant(app);
  const busy = (await createKey(t.owner.headers, { scopes: ["users:read"] })).key;
  const other = (await createKey(t.owner.headers, { scopes: ["users:read"] })).key;
  for (let i = 0; i < 20; i++) {
    const response = await get("/api/tenant/users", withKey(busy), `198.51.100.${i + 1}`);
    expect(response.status).toBe(200);
    expect(response.headers.get("ratelimit-policy")).toContain('"apikey";q=20;w=60');
    expect(response.headers.get("ratelimit")).toContain(`"apikey";r=${19 - i};`);
  }
  for (const path of ["/api/tenant/users", "/api/tenant/domains"]) {
    const refused = await get(path, withKey(busy), "198.51.100.99");
    expect(refused.status).toBe(429);
    expect(refused.headers.get("ratelimit")).toMatch(/"apikey";r=0;t=\d+/);
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(((await refused.json()) as { code: string }).code).toBe("rate_limited");
  }
  expect((await get("/api/tenant/users", withKey(other))).status).toBe(200);
  // a user's bearer token is not counted against any key
  const user = await get("/api/tenant/users", t.owner.headers);
  expect(user.status).toBe(200);
  expect(user.headers.get("ratelimit-policy")).not.toContain("apikey");
  clock.advance(3_000);
  expect((await get("/api/tenant/users", withKey(busy))).status).toBe(200);
});

test("the plan limits the number of keys not revoked (free: 2); revoking one makes room", async () => {
  const t = await signedInTenant(app);
  const first = await createKey(t.owner.headers, { scopes: ["users:read"] });
  await createKey(t.owner.headers, { scopes: ["users:read"] });
  const third = await app.request(
    "/api/tenant/api-keys",
    json({ name: "3", scopes: ["users:read"] }, t.owner.headers),
  );
  expect(third.status).toBe(403);
  expect(((await third.json()) as { code: string }).code).toBe("usage_limit_reached");
  await app.request(`/api/tenant/api-keys/${first.id}`, { method: "DELETE", headers: t.owner.headers });
  expect((await createKey(t.owner.headers, { scopes: ["users:read"] })).status).toBe("active");
});

test("a key in a URL or an error never reaches a log line or a problem body", async () => {
  const t = await signedInTenant(app);
  const issued = await createKey(t.owner.headers, { scopes: ["users:read"] });
  const secret = issued.key.slice(issued.prefix.length + 1);
  const before = app.logs.length;
  const response = await get(`/api/tenant/users?cursor=${issued.key}`, withKey(issued.key));
  expect(response.status).toBe(400);
  expect(await response.text()).not.toContain(secret);
  app.deps.logger.error("client sent", {
    error: new Error(`bad key ${issued.key}`),
    note: `copy of ${issued.key}`,
  });
  await app.deps.pending.settled(5_000);
  const lines = app.logs.slice(before).join("\n");
  expect(lines).toContain(issued.prefix);
  expect(lines).not.toContain(secret);
});

test("pg_dump of the database holds no key in clear", async () => {
  const t = await signedInTenant(app);
  const issued = await createKey(t.owner.headers, { scopes: ["users:read"] });
  await get("/api/tenant/users", withKey(issued.key));
  const rolled = (await (
    await app.request(`/api/tenant/api-keys/${issued.id}/roll`, json({}, t.owner.headers))
  ).json()) as Issued;
  await app.deps.pending.settled(5_000);
  const dump = Bun.spawnSync(["pg_dump", "-h", "127.0.0.1", "-U", "postgres", app.testDatabase.name], {
    stdout: "pipe",
    stderr: "pipe",
  });
  expect(dump.exitCode).toBe(0);
  const text = dump.stdout.toString();
  // the dump has the table and the row (its prefix and hash), never a key or a secret part
  expect(text).toContain(issued.prefix);
  expect(text).toContain(apiKeyHash(rolled.key));
  for (const key of [issued.key, rolled.key]) {
    expect(text).not.toContain(key);
    expect(text).not.toContain(key.slice(issued.prefix.length + 1));
  }
});

test("a suspended tenant's keys are refused at once (401), as its users' sessions are", async () => {
  const t = await signedInTenant(app);
  const issued = await createKey(t.owner.headers, { scopes: ["users:read"] });
  expect((await get("/api/tenant/users", withKey(issued.key))).status).toBe(200);
  await suspendTenant(app.deps, systemCtx("test"), { tenantId: t.id });
  const refused = await get("/api/tenant/users", withKey(issued.key));
  expect(refused.status).toBe(401);
  expect(((await refused.json()) as { detail: string }).detail).toBe("The tenant is suspended.");
});

test("a key belongs to the tenant: it outlives the user who created it", async () => {
  const t = await signedInTenant(app);
  const issued = await createKey(t.admin.headers, { scopes: ["users:read"] });
  expect(issued.createdBy).toBe(t.admin.id);
  expect(
    (await app.request(`/api/tenant/users/${t.admin.id}`, { method: "DELETE", headers: t.owner.headers }))
      .status,
  ).toBe(204);
  expect((await get("/api/tenant/users", withKey(issued.key))).status).toBe(200);
  const [row] = (await listed(t.owner.headers)).filter((k) => k.id === issued.id);
  expect(row?.status).toBe("active");
  expect(row?.createdBy).toBeNull();
});

test("markApiKeyUsed writes at most once a minute whichever process asks, and tells the first use", async () => {
  const t = await signedInTenant(app);
  const issued = await createKey(t.owner.headers, { scopes: ["users:read"] });
  const ctx = { ...systemCtx("test", t.id), clientIp: "192.0.2.10" };
  // another process's recorder does not share this one's memory: the row decides
  expect(await markApiKeyUsed(app.deps, ctx, { keyId: issued.id })).toEqual({ firstUse: true });
  clock.advance(30_000);
  expect(await markApiKeyUsed(app.deps, { ...ctx, clientIp: "192.0.2.11" }, { keyId: issued.id })).toBeNull();
  clock.advance(30_000);
  expect(await markApiKeyUsed(app.deps, { ...ctx, clientIp: "192.0.2.12" }, { keyId: issued.id })).toEqual({
    firstUse: false,
  });
  expect((await listed(t.owner.headers)).find((k) => k.id === issued.id)?.lastUsedIp).toBe("192.0.2.12");
  // another tenant's ctx finds no such key
  const other = await signedInTenant(app);
  clock.advance(61_000);
  expect(await markApiKeyUsed(app.deps, systemCtx("test", other.id), { keyId: issued.id })).toBeNull();
});
