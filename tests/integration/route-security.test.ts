import { afterAll, beforeAll, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { eq, sql } from "drizzle-orm";
import { type ApiKeyScope, MEMBER_REACH, scopesGrant } from "../../src/api-keys/scopes.ts";
import { ManualClock } from "../../src/clock.ts";
import { execute } from "../../src/db/client.ts";
import { tenantDomains, users } from "../../src/db/schema/index.ts";
import { declaredRoutes, undeclaredRoutes } from "../../src/http/access.ts";
import { renderRolesReference } from "../../src/http/roles-reference.ts";
import { s3Settings, startTestS3, type TestS3 } from "../fixtures/s3-server.ts";
import { relaxedLimits, useTestApp } from "../helpers/app.ts";
import { uniqueHost } from "../helpers/domains.ts";
import {
  createUser,
  json,
  loginTokens,
  PASSWORD,
  type SignedInTenant,
  signedInPlatformAdmin,
  signedInTenant,
} from "../helpers/identity.ts";

/**
 * Generated from the app's route table: every route under /api/admin and /api/tenant, every
 * method, is refused without a token (401) and with the wrong role (403) before its input is
 * validated, and a tenant route naming a resource answers 404 for another tenant's resource.
 */

const clock = new ManualClock(Date.now());
let s3: TestS3;
beforeAll(async () => {
  s3 = await startTestS3(clock);
}, 30_000);
afterAll(() => s3.close(), 30_000);
const app = useTestApp({ clock, settings: () => ({ ...relaxedLimits, ...s3Settings(s3) }) });

let tenantA: SignedInTenant;
let tenantB: SignedInTenant;
let admin: string;
let viewer: string;

beforeAll(async () => {
  tenantA = await signedInTenant(app);
  tenantB = await signedInTenant(app);
  admin = (await signedInPlatformAdmin(app)).accessToken;
  // the read-only role, granted the documented way: an administrator adds platform staff with it
  const email = `viewer${crypto.randomUUID().slice(0, 6)}@example.com`;
  const granted = await app.request(
    "/api/admin/platform-users",
    json(
      { email, name: "Viewer", password: PASSWORD, role: "platform_viewer" },
      { authorization: `Bearer ${admin}` },
    ),
  );
  expect(granted.status).toBe(201);
  // granted through the route (the one test that does): its temporary password counts as replaced
  await app.db.update(users).set({ mustChangePassword: false }).where(eq(users.email, email));
  viewer = (await loginTokens(app, { email })).accessToken;
}, 60_000);

interface Route {
  method: string;
  /** Hono's form: /api/tenant/domains/:id */
  path: string;
  pathParams: string[];
  /** Query parameters the OpenAPI document lists for the route. */
  queryParams: string[];
}

/** Every route under /api/admin and /api/tenant, from the app's route table (middleware excluded). */
async function routes(): Promise<Route[]> {
  const doc = (await (await app.request("/api/openapi.json")).json()) as {
    paths: Record<string, Record<string, { parameters?: { in: string; name: string }[] }>>;
  };
  const seen = new Map<string, Route>();
  for (const { method, path } of app.app.routes) {
    if (method === "ALL" || !/^\/api\/(admin|tenant)(\/|$)/.test(path)) continue;
    const key = `${method} ${path}`;
    if (seen.has(key)) continue;
    const operation = doc.paths[path.replace(/:(\w+)/g, "{$1}")]?.[method.toLowerCase()];
    seen.set(key, {
      method,
      path,
      pathParams: [...path.matchAll(/:(\w+)/g)].map((m) => m[1] ?? ""),
      queryParams: (operation?.parameters ?? []).filter((p) => p.in === "query").map((p) => p.name),
    });
  }
  return [...seen.values()];
}

/** Query parameters that page or filter a listing: they name no single resource. */
const NOT_A_RESOURCE = new Set([
  "limit",
  "cursor",
  "offset",
  "before",
  "prefix",
  "status",
  "kind",
  "group",
  "createdFrom",
  "createdTo",
  // the audit log's filters: scoped to the caller's tenant like the listing itself
  "action",
  "actor",
  "targetType",
  "targetId",
  "from",
  "to",
]);

/** Valid-looking values, so that input validation could not answer in place of the guard. */
function sampleParams(route: Route): { path: Record<string, string>; query: Record<string, string> } {
  const samples: Record<string, string> = {
    tenantId: tenantB.id,
    userId: crypto.randomUUID(),
    id: route.path.startsWith("/api/admin/jobs") ? "1" : crypto.randomUUID(),
    type: "sms",
    name: "payment-webhook",
    featureKey: "api_calls",
    key: "report.txt",
    deliveryId: crypto.randomUUID(),
    flowId: crypto.randomUUID(),
    invitationId: crypto.randomUUID(),
    exportId: crypto.randomUUID(),
    linkId: crypto.randomUUID(),
  };
  const pick = (names: string[]) =>
    Object.fromEntries(
      names.map((name) => {
        const value = samples[name];
        if (value === undefined) throw new Error(`no sample value for parameter "${name}" of ${route.path}`);
        return [name, value];
      }),
    );
  return {
    path: pick(route.pathParams),
    query: pick(route.queryParams.filter((q) => !NOT_A_RESOURCE.has(q))),
  };
}

function url(route: Route, params: { path: Record<string, string>; query: Record<string, string> }): string {
  const path = route.path.replace(/:(\w+)/g, (_, name: string) =>
    encodeURIComponent(params.path[name] ?? ""),
  );
  const query = new URLSearchParams(params.query).toString();
  return query ? `${path}?${query}` : path;
}

/** The request, with an empty JSON body where one may go: the guard must answer before validation. */
function call(route: Route, target: string, token?: string): Promise<Response> {
  const init: RequestInit =
    route.method === "GET" || route.method === "DELETE"
      ? { method: route.method }
      : { ...json({}), method: route.method };
  const headers = { ...(init.headers as Record<string, string> | undefined) };
  if (token) headers.authorization = `Bearer ${token}`;
  return app.request(target, { ...init, headers });
}

type TenantRoleName = "owner" | "admin" | "member";
const EVERYONE: readonly TenantRoleName[] = ["owner", "admin", "member"];

/**
 * The role matrix of docs/roles.md, route by route: which tenant roles the guards let through, as
 * each tenant route declares them (`apiRoute(tenantAccess(roles, { apiKey }), …)`, src/http/access.ts).
 * Finer rules live in the domain functions and are tested below (members delete only their own
 * objects; admins never create, disable or remove an owner).
 */
function roleMatrix(): Record<string, readonly TenantRoleName[]> {
  const matrix: Record<string, readonly TenantRoleName[]> = {};
  for (const { method, path, access } of declaredRoutes(app.app.routes))
    if (typeof access === "object")
      matrix[`${method} ${path}`] = access.tenant === "everyone" ? EVERYONE : access.tenant;
  return matrix;
}

/** Runs `check` for each route and collects every answer that differs from the expected status. */
async function mismatches(
  list: Route[],
  check: (route: Route) => Promise<{ expected: number; response: Response; who: string } | null>,
): Promise<string[]> {
  const found: string[] = [];
  for (const route of list) {
    const result = await check(route);
    if (!result) continue;
    const { expected, response, who } = result;
    const body = await response.text();
    if (response.status !== expected)
      found.push(
        `${route.method} ${route.path} (${who}): expected ${expected}, got ${response.status} ${body}`,
      );
  }
  return found;
}

test("the route table has admin and tenant routes to check", async () => {
  const list = await routes();
  expect(list.filter((r) => r.path.startsWith("/api/admin")).length).toBeGreaterThan(10);
  expect(list.filter((r) => r.path.startsWith("/api/tenant")).length).toBeGreaterThan(5);
  // admin routes declare `platform` (platform staff only): the walks below cover each one
  const keys = list.map((r) => `${r.method} ${r.path}`);
  for (const key of [
    "POST /api/admin/jobs/:id/cancel",
    "POST /api/admin/jobs/cancel",
    "POST /api/admin/jobs/retry",
  ])
    expect(keys).toContain(key);
});

test("every admin and tenant route answers 401 without a token", async () => {
  const found = await mismatches(await routes(), async (route) => ({
    expected: 401,
    response: await call(route, url(route, sampleParams(route))),
    who: "no token",
  }));
  expect(found).toEqual([]);
});

test("every admin route answers 403 to a tenant owner", async () => {
  const admins = (await routes()).filter((r) => r.path.startsWith("/api/admin"));
  const found = await mismatches(admins, async (route) => ({
    expected: 403,
    response: await call(route, url(route, sampleParams(route)), tenantA.owner.accessToken),
    who: "tenant owner",
  }));
  expect(found).toEqual([]);
});

test("every tenant route answers 403 to a platform administrator, who belongs to no tenant", async () => {
  const tenantRoutes = (await routes()).filter((r) => r.path.startsWith("/api/tenant"));
  const found = await mismatches(tenantRoutes, async (route) => ({
    expected: 403,
    response: await call(route, url(route, sampleParams(route)), admin),
    who: "platform administrator",
  }));
  expect(found).toEqual([]);
});

/**
 * The platform side of the matrix, a rule rather than rows (every new admin route is covered the
 * moment it exists): `platform_admin` every method, `platform_viewer` only GET (docs/roles.md).
 */
const PLATFORM_MATRIX = {
  platform_admin: (_method: string) => true,
  platform_viewer: (method: string) => method === "GET" || method === "HEAD",
} as const;

test("platform_viewer: every admin read is let through, every admin change answers 403, before validation", async () => {
  const admins = (await routes()).filter((r) => r.path.startsWith("/api/admin"));
  expect(admins.filter((r) => r.method === "GET").length).toBeGreaterThan(5);
  expect(admins.filter((r) => r.method !== "GET").length).toBeGreaterThan(5);
  const found: string[] = [];
  for (const route of admins) {
    const response = await call(route, url(route, sampleParams(route)), viewer);
    const allowed = PLATFORM_MATRIX.platform_viewer(route.method);
    const refused = response.status === 403;
    if (refused === allowed || response.status === 401)
      found.push(
        `${route.method} ${route.path} (platform_viewer): got ${response.status} ${await response.text()}`,
      );
    if (refused) {
      const body = (await response.json()) as { code: string; detail?: string };
      if (body.code !== "forbidden") found.push(`${route.method} ${route.path}: ${body.code}`);
    }
  }
  expect(found).toEqual([]);
});

test("platform_viewer: every tenant route answers 403 (platform staff belong to no tenant)", async () => {
  const tenantRoutes = (await routes()).filter((r) => r.path.startsWith("/api/tenant"));
  const found = await mismatches(tenantRoutes, async (route) => ({
    expected: 403,
    response: await call(route, url(route, sampleParams(route)), viewer),
    who: "platform viewer",
  }));
  expect(found).toEqual([]);
});

test("platform_viewer cannot grant itself or anyone a platform role; a tenant owner cannot either", async () => {
  const body = { email: "x@example.com", name: "X", password: PASSWORD, role: "platform_admin" };
  for (const token of [viewer, tenantA.owner.accessToken]) {
    const response = await app.request(
      "/api/admin/platform-users",
      json(body, { authorization: `Bearer ${token}` }),
    );
    expect(response.status).toBe(403);
  }
  const [none] = await app.db.select({ id: users.id }).from(users).where(eq(users.email, "x@example.com"));
  expect(none).toBeUndefined();
  // the administrator may; twice is a conflict, and the new user must change the password
  const first = await app.request(
    "/api/admin/platform-users",
    json(body, { authorization: `Bearer ${admin}` }),
  );
  expect(first.status).toBe(201);
  const again = await app.request(
    "/api/admin/platform-users",
    json(body, { authorization: `Bearer ${admin}` }),
  );
  expect(again.status).toBe(409);
  const [created] = await app.db
    .select({ mustChangePassword: users.mustChangePassword, tenantId: users.tenantId })
    .from(users)
    .where(eq(users.email, "x@example.com"));
  expect(created).toEqual({ mustChangePassword: true, tenantId: null });
});

test("every tenant route declares its tenant roles, and every route under /api/ declares its access", async () => {
  const tenantRoutes = (await routes()).filter((r) => r.path.startsWith("/api/tenant"));
  const keys = tenantRoutes.map((r) => `${r.method} ${r.path}`);
  const matrix = roleMatrix();
  expect(keys.filter((key) => !(key in matrix))).toEqual([]);
  expect(Object.keys(matrix).filter((key) => !keys.includes(key))).toEqual([]);
  expect(undeclaredRoutes(declaredRoutes(app.app.routes))).toEqual([]);
});

test("MEMBER_REACH names every scope a member's routes take: a key that creates members could act as one", () => {
  const memberScopes = new Set<string>();
  for (const { access } of declaredRoutes(app.app.routes))
    if (
      typeof access === "object" &&
      (access.tenant === "everyone" || access.tenant.includes("member")) &&
      access.apiKey !== "any"
    )
      memberScopes.add(access.apiKey);
  expect(memberScopes.has("none")).toBe(false);
  expect([...memberScopes].every((scope) => scopesGrant(MEMBER_REACH, scope as ApiKeyScope))).toBe(true);
});

test("docs/roles.md matches the declared access (run `bun run docs:roles` after changing a route's)", () => {
  const committed = readFileSync(resolve(import.meta.dir, "../../docs/roles.md"), "utf8");
  expect(committed).toBe(renderRolesReference(declaredRoutes(app.app.routes)));
});

test("the role matrix holds route by route: a role outside a route's row gets 403, one inside is let through", async () => {
  const tenantRoutes = (await routes()).filter((r) => r.path.startsWith("/api/tenant"));
  const tokens: Record<TenantRoleName, string> = {
    owner: tenantA.owner.accessToken,
    admin: tenantA.admin.accessToken,
    member: tenantA.member.accessToken,
  };
  const matrix = roleMatrix();
  const found: string[] = [];
  for (const route of tenantRoutes) {
    const allowed = matrix[`${route.method} ${route.path}`] ?? [];
    for (const role of EVERYONE) {
      // DELETE of a user: a random id, so an allowed role gets 404, never removes anyone
      const response = await call(route, url(route, sampleParams(route)), tokens[role]);
      const refused = response.status === 403;
      if (refused === allowed.includes(role) || response.status === 401)
        found.push(
          `${route.method} ${route.path} (${role}): got ${response.status} ${await response.text()}`,
        );
    }
  }
  expect(found).toEqual([]);
});

test("admins manage users but not owners: no creating, disabling or removing an owner", async () => {
  const asAdmin = tenantA.admin.headers;
  const newUser = (role: string) => ({
    email: `u${crypto.randomUUID().slice(0, 8)}@example.com`,
    name: "New User",
    password: "a long and unusual passphrase 7",
    role,
  });
  const owner = await app.request("/api/tenant/users", json(newUser("owner"), asAdmin));
  expect(owner.status).toBe(403);
  expect(((await owner.json()) as { code: string }).code).toBe("forbidden");
  for (const path of [
    `/api/tenant/users/${tenantA.owner.id}/disable`,
    `/api/tenant/users/${tenantA.owner.id}`,
  ])
    expect(
      (await app.request(path, { method: path.endsWith("disable") ? "POST" : "DELETE", headers: asAdmin }))
        .status,
    ).toBe(403);
  const [still] = await app.db
    .select({ status: users.status })
    .from(users)
    .where(eq(users.id, tenantA.owner.id));
  expect(still?.status).toBe("Active");
  // a member they may add, disable and remove; an owner may add an owner
  const member = await app.request("/api/tenant/users", json(newUser("member"), asAdmin));
  expect(member.status).toBe(201);
  const { id } = (await member.json()) as { id: string };
  expect(
    (await app.request(`/api/tenant/users/${id}/disable`, { method: "POST", headers: asAdmin })).status,
  ).toBe(204);
  expect((await app.request(`/api/tenant/users/${id}`, { method: "DELETE", headers: asAdmin })).status).toBe(
    204,
  );
  const byOwner = await app.request("/api/tenant/users", json(newUser("owner"), tenantA.owner.headers));
  expect(byOwner.status).toBe(201);
});

type Params = { path: Record<string, string>; query: Record<string, string> };
/** Tenant B's resource as a route names it, and whether it is still as tenant B left it. */
type Resource = { params: Params; intact(): Promise<boolean> };

const userCase = async (): Promise<Resource> => {
  const { id } = await createUser(app.db, tenantB.id);
  return {
    params: { path: { userId: id }, query: {} },
    intact: async () =>
      (await app.db.select({ status: users.status }).from(users).where(eq(users.id, id)))[0]?.status ===
      "Active",
  };
};

const domainCase = async (): Promise<Resource> => {
  const [row] = await app.db
    .insert(tenantDomains)
    .values({ tenantId: tenantB.id, hostname: uniqueHost("cross"), verificationToken: "t" })
    .returning();
  if (!row) throw new Error("no domain");
  return {
    params: { path: { id: row.id }, query: {} },
    intact: async () => {
      const [now] = await app.db.select().from(tenantDomains).where(eq(tenantDomains.id, row.id));
      return now?.status === row.status && now.nextCheckAt?.getTime() === row.nextCheckAt?.getTime();
    },
  };
};

/** An object tenant B uploaded through the API; its key is relative to tenant B. */
const objectCase = async (): Promise<Resource> => {
  const key = `cross-${crypto.randomUUID()}.txt`;
  const auth = tenantB.owner.headers;
  const granted = await app.request(
    "/api/tenant/storage/uploads",
    json({ key, contentType: "text/plain", size: 5 }, auth),
  );
  if (granted.status !== 201) throw new Error(`upload refused: ${granted.status} ${await granted.text()}`);
  const upload = (await granted.json()) as { url: string; headers: Record<string, string> };
  const put = await fetch(upload.url, { method: "PUT", body: "hello", headers: upload.headers });
  if (put.status !== 200) throw new Error(`upload failed: ${put.status}`);
  return {
    params: { path: {}, query: { key } },
    intact: async () =>
      (
        await app.request(`/api/tenant/storage/objects/download?key=${encodeURIComponent(key)}`, {
          headers: auth,
        })
      ).status === 200,
  };
};

/** Tenant B's webhook endpoint with one failed delivery (rows written directly: no secret needed here). */
const webhookCase = async (): Promise<Resource> => {
  const [endpoint] = await execute<{ id: string; updated_at: string }>(
    app.db,
    sql`insert into webhook_endpoints (tenant_id, url, events) values (${tenantB.id}, 'https://hooks.example.com/b', '{*}')
        returning id, updated_at::text`,
  );
  if (!endpoint) throw new Error("no endpoint");
  const [delivery] = await execute<{ id: string }>(
    app.db,
    sql`with ev as (insert into webhook_events (tenant_id, type, data) values (${tenantB.id}, 'webhook.test', '{}') returning id)
        insert into webhook_deliveries (tenant_id, endpoint_id, event_id, status, attempts)
        select ${tenantB.id}, ${endpoint.id}, id, 'failed', 3 from ev returning id`,
  );
  if (!delivery) throw new Error("no delivery");
  return {
    params: { path: { id: endpoint.id, deliveryId: delivery.id }, query: {} },
    intact: async () => {
      const [now] = await execute<{ updated_at: string; status: string; jobs: number }>(
        app.db,
        sql`select e.updated_at::text, d.status,
                   (select count(*)::int from background_jobs where payload->>'deliveryId' = ${delivery.id}) as jobs
            from webhook_endpoints e join webhook_deliveries d on d.endpoint_id = e.id
            where e.id = ${endpoint.id} and d.id = ${delivery.id}`,
      );
      return now?.updated_at === endpoint.updated_at && now.status === "failed" && now.jobs === 0;
    },
  };
};

/**
 * How to make tenant B's resource for each tenant route that names one (path parameter, or a query
 * parameter outside NOT_A_RESOURCE). A new such route fails the test below until it has a case.
 */
/** An API key of tenant B, made by its owner through the API. */
const apiKeyCase = async (): Promise<Resource> => {
  const created = await app.request(
    "/api/tenant/api-keys",
    json({ name: "cross", scopes: ["users:read"] }, tenantB.owner.headers),
  );
  if (created.status !== 201) throw new Error(`key refused: ${created.status} ${await created.text()}`);
  const { id, key } = (await created.json()) as { id: string; key: string };
  return {
    params: { path: { id }, query: {} },
    intact: async () =>
      (await app.request("/api/tenant/users", { headers: { authorization: `Bearer ${key}` } })).status ===
      200,
  };
};

/** A pending invitation of tenant B, made by its owner through the API. */
const invitationCase = async (): Promise<Resource> => {
  const email = `cross${crypto.randomUUID().slice(0, 8)}@example.com`;
  const created = await app.request("/api/tenant/invitations", json({ email }, tenantB.owner.headers));
  if (created.status !== 201)
    throw new Error(`invitation refused: ${created.status} ${await created.text()}`);
  const { id } = (await created.json()) as { id: string };
  const stateOf = async () =>
    (
      await execute<{ state: string }>(
        app.db,
        sql`select status || expires_at::text || updated_at::text as state from tenant_invitations where id = ${id}`,
      )
    )[0]?.state;
  const before = await stateOf();
  return {
    params: { path: { invitationId: id }, query: {} },
    intact: async () => (await stateOf()) === before,
  };
};

/** An export of tenant B (the row only: reading it must not reach the job or storage). */
const exportCase = async (): Promise<Resource> => {
  const [row] = await execute<{ id: string }>(
    app.db,
    sql`insert into tenant_exports (tenant_id, requested_by) values (${tenantB.id}, 'test') returning id`,
  );
  if (!row) throw new Error("no export");
  return {
    params: { path: { exportId: row.id }, query: {} },
    intact: async () =>
      (
        await execute<{ status: string }>(app.db, sql`select status from tenant_exports where id = ${row.id}`)
      )[0]?.status === "pending",
  };
};

/** A SCIM token of tenant B (written as its owner's request would: tenant B has no `sso` plan here). */
const scimTokenCase = async (): Promise<Resource> => {
  const [row] = await execute<{ id: string }>(
    app.db,
    sql`insert into scim_tokens (tenant_id, name, prefix, secret_hash)
        values (${tenantB.id}, 'cross', ${`plscim_${crypto.randomUUID().replaceAll("-", "").slice(0, 12)}`}, ${"0".repeat(64)})
        returning id`,
  );
  const id = row?.id ?? "";
  return {
    params: { path: { id }, query: {} },
    intact: async () =>
      (
        await execute<{ revoked: boolean }>(
          app.db,
          sql`select revoked_at is not null as revoked from scim_tokens where id = ${id}`,
        )
      )[0]?.revoked === false,
  };
};

/** An e-mail domain tenant B claimed (its owner's request would need the `sso` plan). */
const emailDomainCase = async (): Promise<Resource> => {
  const [row] = await execute<{ id: string }>(
    app.db,
    sql`insert into tenant_email_domains (tenant_id, domain, verification_token)
        values (${tenantB.id}, ${`cross-${crypto.randomUUID().slice(0, 8)}.example`}, 't') returning id`,
  );
  const id = row?.id ?? "";
  const stateOf = async () =>
    (
      await execute<{ state: string }>(
        app.db,
        sql`select status || updated_at::text as state from tenant_email_domains where id = ${id}`,
      )
    )[0]?.state;
  const before = await stateOf();
  return { params: { path: { id }, query: {} }, intact: async () => (await stateOf()) === before };
};

/** A SAML connection of tenant B (the row only: its SP metadata needs no IdP). */
const samlConnectionCase = async (): Promise<Resource> => {
  const [row] = await execute<{ id: string }>(
    app.db,
    sql`insert into sso_connections (tenant_id, type, status, settings) values (${tenantB.id}, 'saml', 'inactive', '{}') returning id`,
  );
  if (!row) throw new Error("no connection");
  return {
    params: { path: { id: row.id }, query: {} },
    intact: async () =>
      (await execute(app.db, sql`select 1 from sso_connections where id = ${row.id}`)).length === 1,
  };
};

const otherTenantsResource: Record<string, () => Promise<Resource>> = {
  "POST /api/tenant/email-domains/:id/check": emailDomainCase,
  "DELETE /api/tenant/email-domains/:id": emailDomainCase,
  "GET /api/tenant/sso/connections/:id/saml-metadata": samlConnectionCase,
  "GET /api/tenant/sso/connections/:id": samlConnectionCase,
  "PATCH /api/tenant/sso/connections/:id": samlConnectionCase,
  "DELETE /api/tenant/sso/connections/:id": samlConnectionCase,
  "POST /api/tenant/sso/connections/:id/test": samlConnectionCase,
  "GET /api/tenant/exports/:exportId": exportCase,
  "DELETE /api/tenant/scim/tokens/:id": scimTokenCase,
  "DELETE /api/tenant/invitations/:invitationId": invitationCase,
  "POST /api/tenant/invitations/:invitationId/resend": invitationCase,
  "POST /api/tenant/users/:userId/disable": userCase,
  "DELETE /api/tenant/users/:userId": userCase,
  "DELETE /api/tenant/users/:userId/sessions": userCase,
  "DELETE /api/tenant/users/:userId/mfa": userCase,
  "GET /api/tenant/domains/:id": domainCase,
  "POST /api/tenant/domains/:id/check": domainCase,
  "DELETE /api/tenant/domains/:id": domainCase,
  "GET /api/tenant/storage/objects/download": objectCase,
  "DELETE /api/tenant/storage/objects": objectCase,
  "DELETE /api/tenant/api-keys/:id": apiKeyCase,
  "POST /api/tenant/api-keys/:id/roll": apiKeyCase,
  "GET /api/tenant/webhooks/:id": webhookCase,
  "PATCH /api/tenant/webhooks/:id": webhookCase,
  "DELETE /api/tenant/webhooks/:id": webhookCase,
  "POST /api/tenant/webhooks/:id/rotate-secret": webhookCase,
  "POST /api/tenant/webhooks/:id/test": webhookCase,
  "GET /api/tenant/webhooks/:id/deliveries": webhookCase,
  "POST /api/tenant/webhooks/:id/deliveries/:deliveryId/retry": webhookCase,
  "POST /api/tenant/webhooks/:id/replay": webhookCase,
};

type Schema = { $ref?: string; example?: unknown };
type Operation = { requestBody?: { content?: Record<string, { schema?: Schema }> } };

interface ApiDocument {
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, Schema> };
}
let document: Promise<ApiDocument> | undefined;
const documentOnce = () => {
  document ??= app.request("/api/openapi.json").then((answer) => answer.json() as Promise<ApiDocument>);
  return document;
};

/**
 * The case of a resource the API creates and reads, for a route no case above is written for:
 * tenant B's owner creates it with `POST <collection>` (the body: the example the document gives
 * the create operation's body), and it is intact while `GET <collection>/{id}` reads the same. A
 * new resource declared so needs no case here.
 */
async function createdCase(route: Route): Promise<(() => Promise<Resource>) | undefined> {
  const at = route.path.indexOf("/:");
  const [param, ...others] = route.pathParams;
  if (at < 0 || !param || others.length > 0) return undefined;
  const collection = route.path.slice(0, at);
  const doc = await documentOnce();
  const schema = doc.paths[collection]?.post?.requestBody?.content?.["application/json"]?.schema;
  const body = (schema?.$ref ? doc.components.schemas[schema.$ref.split("/").pop() ?? ""] : schema)?.example;
  if (body === undefined || !doc.paths[`${collection}/{${param}}`]?.get) return undefined;
  return async () => {
    const created = await app.request(
      collection,
      json(body as Record<string, unknown>, tenantB.owner.headers),
    );
    if (created.status !== 201)
      throw new Error(`${collection} refused: ${created.status} ${await created.text()}`);
    const { id } = (await created.json()) as { id: string };
    const read = async () =>
      (await app.request(`${collection}/${id}`, { headers: tenantB.owner.headers })).text();
    const before = await read();
    return { params: { path: { [param]: id }, query: {} }, intact: async () => (await read()) === before };
  };
}

/** The written case of a route, else the derived one (createdCase). */
async function caseOf(route: Route): Promise<(() => Promise<Resource>) | undefined> {
  return otherTenantsResource[`${route.method} ${route.path}`] ?? (await createdCase(route));
}

/** Tenant routes with a path parameter, or a query parameter that names a resource. */
async function parameterisedTenantRoutes(): Promise<Route[]> {
  return (await routes()).filter(
    (r) =>
      r.path.startsWith("/api/tenant") &&
      (r.pathParams.length > 0 || r.queryParams.some((q) => !NOT_A_RESOURCE.has(q))),
  );
}

test("every tenant route naming a resource has a cross-tenant case (written, or derived from its create route)", async () => {
  const missing: string[] = [];
  for (const route of await parameterisedTenantRoutes())
    if (!(await caseOf(route))) missing.push(`${route.method} ${route.path}`);
  expect(missing).toEqual([]);
  // and no case is left for a route that is gone
  const present = new Set((await routes()).map((r) => `${r.method} ${r.path}`));
  expect(Object.keys(otherTenantsResource).filter((key) => !present.has(key))).toEqual([]);
});

test("a tenant owner asking for another tenant's resource gets 404, and the resource is untouched", async () => {
  const touched: string[] = [];
  const found = await mismatches(await parameterisedTenantRoutes(), async (route) => {
    const create = await caseOf(route);
    if (!create) return null;
    const resource = await create();
    const response = await call(route, url(route, resource.params), tenantA.owner.accessToken);
    if (!(await resource.intact())) touched.push(`${route.method} ${route.path}`);
    return { expected: 404, response, who: "owner of another tenant" };
  });
  expect(found).toEqual([]);
  expect(touched).toEqual([]);
});

/** Tenant A's key with `scopes`, made by its owner (each replaces the last: the free plan holds two). */
async function keyOf(scopes: string[]): Promise<string> {
  const auth = tenantA.owner.headers;
  const created = await app.request("/api/tenant/api-keys", json({ name: "walk", scopes }, auth));
  if (created.status !== 201) throw new Error(`key refused: ${created.status} ${await created.text()}`);
  const { id, key } = (await created.json()) as { id: string; key: string };
  keysToRevoke.push(id);
  return key;
}
const keysToRevoke: string[] = [];
async function revokeWalkKeys(): Promise<void> {
  for (const id of keysToRevoke.splice(0))
    await app.request(`/api/tenant/api-keys/${id}`, {
      method: "DELETE",
      headers: tenantA.owner.headers,
    });
}

/**
 * What a key of each scope may reach (docs/api-keys.md), written out here rather than read from the
 * routes' declared access, so that a declaration that widens a scope fails here: a route area a
 * scope does not name, or a tenant route no key may call (audit, key management), must be 403 to
 * every key.
 */
const KEY_REACH: Record<string, (method: string, path: string) => boolean> = {
  "users:read": (m, p) => m === "GET" && p.startsWith("/api/tenant/users"),
  // resetting a member's second factors takes a person after a fresh factor: no key (docs/auth.md)
  "users:write": (m, p) => m !== "GET" && p.startsWith("/api/tenant/users/") && !p.endsWith("/mfa"),
  // creating a user takes the dedicated scope (docs/api-keys.md)
  "users:admin": (m, p) => m === "POST" && p === "/api/tenant/users",
  "domains:read": (m, p) => m === "GET" && p.startsWith("/api/tenant/domains"),
  "domains:write": (m, p) => m !== "GET" && p.startsWith("/api/tenant/domains"),
  "storage:*": (_, p) => p.startsWith("/api/tenant/storage"),
  "webhooks:*": (_, p) => p.startsWith("/api/tenant/webhooks"),
};
/** Every key reads the tenant's features. */
const ANY_KEY = (method: string, path: string) => method === "GET" && path === "/api/tenant/features";

test("every admin route answers 401 to an API key, and every tenant route answers by the key's scopes", async () => {
  const list = await routes();
  const everything = await keyOf(Object.keys(KEY_REACH));
  const found = await mismatches(
    list.filter((r) => r.path.startsWith("/api/admin")),
    async (route) => ({
      expected: 401,
      response: await call(route, url(route, sampleParams(route)), everything),
      who: "API key",
    }),
  );
  await revokeWalkKeys();
  const tenantRoutes = list.filter((r) => r.path.startsWith("/api/tenant"));
  const keys: [string, string[]][] = [
    ["every scope", Object.keys(KEY_REACH)],
    ...Object.keys(KEY_REACH).map((scope): [string, string[]] => [scope, [scope]]),
  ];
  for (const [name, scopes] of keys) {
    const key = await keyOf(scopes);
    for (const route of tenantRoutes) {
      const reach =
        ANY_KEY(route.method, route.path) || scopes.some((s) => KEY_REACH[s]?.(route.method, route.path));
      const response = await call(route, url(route, sampleParams(route)), key);
      // a reachable route answers anything but 401 and 403 (a random id is 404, an empty body 400)
      if ((response.status === 403) === reach || response.status === 401)
        found.push(
          `${route.method} ${route.path} (${name}): got ${response.status} ${await response.text()}`,
        );
    }
    await revokeWalkKeys();
  }
  expect(found).toEqual([]);
});
