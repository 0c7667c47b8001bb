import { expect, test } from "bun:test";
import { updateFeatureOverride } from "../../src/billing/update-feature-override.ts";
import { systemCtx } from "../../src/context.ts";
import { relaxedLimits, useTestApp } from "../helpers/app.ts";
import { json, type SignedInTenant, signedInTenant } from "../helpers/identity.ts";

// A scripted conformance run of RFC 7644 against the real app: the examples of §3 (create, get,
// filter, PATCH, replace, delete, pagination, errors) and the exact requests Okta and Entra ID send
// (their provisioning guides' sample bodies), with a tenant's SCIM token. Every answer is also checked
// against the OpenAPI document by the harness.

const app = useTestApp({ settings: relaxedLimits, cache: "scim" });

const SCIM = "application/scim+json";
const USER = "urn:ietf:params:scim:schemas:core:2.0:User";
const PATCH = "urn:ietf:params:scim:api:messages:2.0:PatchOp";
const ERROR = "urn:ietf:params:scim:api:messages:2.0:Error";

async function scimTenant(): Promise<{ tenant: SignedInTenant; token: string }> {
  const tenant = await signedInTenant(app, { plan: "enterprise" });
  const response = await app.request("/api/tenant/scim/tokens", json({ name: "Okta" }, tenant.owner.headers));
  expect(response.status).toBe(201);
  const { token } = (await response.json()) as { token: string };
  expect(token).toMatch(/^plscim_[0-9A-Za-z]{12}_[0-9A-Za-z]{32}$/);
  return { tenant, token };
}

function scim(token: string) {
  return async (method: string, path: string, body?: unknown) => {
    const response = await app.request(`/scim/v2${path}`, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(body === undefined ? {} : { "content-type": SCIM }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    return {
      status: response.status,
      type: response.headers.get("content-type") ?? "",
      location: response.headers.get("location"),
      // biome-ignore lint/suspicious/noExplicitAny: the conformance script reads SCIM bodies as a client would, by path
      body: (text ? JSON.parse(text) : null) as Record<string, any>,
    };
  };
}

const userBody = (userName: string, more: Record<string, unknown> = {}) => ({
  schemas: [USER],
  userName,
  name: { givenName: "Barbara", familyName: "Jensen" },
  emails: [{ value: userName, type: "work", primary: true }],
  active: true,
  ...more,
});

test("a token is shown once, listed without its secret, and 402 without sso", async () => {
  const free = await signedInTenant(app);
  const refused = await app.request("/api/tenant/scim/tokens", json({}, free.owner.headers));
  expect(refused.status).toBe(402);
  const { tenant, token } = await scimTenant();
  const admin = await app.request("/api/tenant/scim/tokens", json({}, tenant.admin.headers));
  expect(admin.status).toBe(403);
  const listed = (await (
    await app.request("/api/tenant/scim/tokens", { headers: tenant.owner.headers })
  ).json()) as { items: { id: string; prefix: string }[] };
  expect(listed.items).toHaveLength(1);
  expect(JSON.stringify(listed)).not.toContain(token);
  expect(token.startsWith(listed.items[0]?.prefix ?? "-")).toBe(true);
  const call = scim(token);
  expect((await call("GET", "/ServiceProviderConfig")).status).toBe(200);
  // deleted: refused at once
  const id = listed.items[0]?.id;
  expect(
    (await app.request(`/api/tenant/scim/tokens/${id}`, { method: "DELETE", headers: tenant.owner.headers }))
      .status,
  ).toBe(204);
  const after = await call("GET", "/ServiceProviderConfig");
  expect(after.status).toBe(401);
  expect(after.body.schemas).toEqual([ERROR]);
  expect(after.body.status).toBe("401");
  // a made-up token and none at all
  expect((await scim(`${token.slice(0, -1)}x`)("GET", "/Users")).status).toBe(401);
  expect((await app.request("/scim/v2/Users")).status).toBe(401);
});

test("discovery: ServiceProviderConfig, ResourceTypes, Schemas", async () => {
  const { token } = await scimTenant();
  const call = scim(token);
  const spc = await call("GET", "/ServiceProviderConfig");
  expect(spc.type).toStartWith(SCIM);
  expect(spc.body.patch.supported).toBe(true);
  expect(spc.body.filter.supported).toBe(true);
  expect(spc.body.bulk.supported).toBe(false);
  const types = await call("GET", "/ResourceTypes");
  expect(types.body.Resources.map((r: { name: string }) => r.name)).toEqual(["User", "Group"]);
  const schemas = await call("GET", "/Schemas");
  expect(schemas.body.Resources.map((r: { id: string }) => r.id)).toContain(USER);
});

test("RFC 7644 §3.3, §3.4.1, §3.4.2, §3.5.1, §3.6: create, get, filter, replace, delete", async () => {
  const { tenant, token } = await scimTenant();
  const call = scim(token);
  const created = await call("POST", "/Users", userBody("bjensen@example.com", { externalId: "bjensen" }));
  expect(created.status).toBe(201);
  expect(created.type).toStartWith(SCIM);
  const id = created.body.id as string;
  expect(created.location).toEndWith(`/scim/v2/Users/${id}`);
  expect(created.body).toMatchObject({
    schemas: [USER],
    userName: "bjensen@example.com",
    externalId: "bjensen",
    active: true,
    name: { givenName: "Barbara", familyName: "Jensen" },
    meta: { resourceType: "User" },
  });
  // the same userName again: 409 uniqueness
  const again = await call("POST", "/Users", userBody("BJensen@example.com"));
  expect(again.status).toBe(409);
  expect(again.body).toMatchObject({ schemas: [ERROR], status: "409", scimType: "uniqueness" });

  expect((await call("GET", `/Users/${id}`)).body.userName).toBe("bjensen@example.com");
  // the member exists in the tenant, with the name the directory sent
  const users = (await (
    await app.request("/api/tenant/users", { headers: tenant.owner.headers })
  ).json()) as {
    items: { id: string; email: string; name: string; role: string }[];
  };
  expect(users.items.find((u) => u.id === id)).toMatchObject({
    email: "bjensen@example.com",
    name: "Barbara Jensen",
    role: "member",
  });

  // filters: eq on userName (case-insensitive), externalId, emails.value, sw, and, a value path
  const find = async (filter: string) => {
    const listed = await call("GET", `/Users?filter=${encodeURIComponent(filter)}`);
    expect(listed.status).toBe(200);
    return (listed.body.Resources as { id: string }[]).map((r) => r.id);
  };
  expect(await find('userName eq "BJENSEN@example.com"')).toEqual([id]);
  expect(await find('externalId eq "bjensen"')).toEqual([id]);
  expect(await find('emails.value eq "bjensen@example.com"')).toEqual([id]);
  expect(await find('emails[type eq "work" and value co "jensen"]')).toEqual([id]);
  expect(await find('userName sw "bjen" and active eq true')).toEqual([id]);
  expect(await find('displayName eq "Barbara Jensen"')).toEqual([id]);
  expect(await find('userName eq "nobody@example.com"')).toEqual([]);
  // members who joined before the directory are Users too (the owner, by address)
  expect(await find(`userName eq "${tenant.owner.email}"`)).toEqual([tenant.owner.id]);
  const bad = await call("GET", `/Users?filter=${encodeURIComponent("userName eq")}`);
  expect(bad.status).toBe(400);
  expect(bad.body).toMatchObject({ schemas: [ERROR], status: "400", scimType: "invalidFilter" });
  const unknown = await call("GET", `/Users?filter=${encodeURIComponent('password eq "x"')}`);
  expect(unknown.body.scimType).toBe("invalidFilter");

  // replace (PUT): attributes as sent; a changed userName changes the address
  const replaced = await call(
    "PUT",
    `/Users/${id}`,
    userBody("babs@example.com", {
      externalId: "bjensen",
      title: "Tour Guide",
      name: { formatted: "Babs Jensen" },
      displayName: "Babs",
    }),
  );
  expect(replaced.status).toBe(200);
  expect(replaced.body).toMatchObject({
    userName: "babs@example.com",
    title: "Tour Guide",
    displayName: "Babs",
  });
  expect(replaced.body.meta.version).not.toBe(created.body.meta.version);

  // excludedAttributes / attributes
  const slim = await call("GET", `/Users/${id}?attributes=userName`);
  expect(Object.keys(slim.body).sort()).toEqual(["id", "meta", "schemas", "userName"]);

  // delete: gone, then 404 as a SCIM error
  expect((await call("DELETE", `/Users/${id}`)).status).toBe(204);
  const gone = await call("GET", `/Users/${id}`);
  expect(gone.status).toBe(404);
  expect(gone.body).toMatchObject({ schemas: [ERROR], status: "404" });
  expect((await call("DELETE", `/Users/${id}`)).status).toBe(404);
  // a body that is not a User
  const invalid = await call("POST", "/Users", { schemas: [USER], userName: "not an address" });
  expect(invalid.body).toMatchObject({ status: "400", scimType: "invalidValue" });
  const noSchema = await call("POST", "/Users", { userName: "a@example.com" });
  expect(noSchema.body.scimType).toBe("invalidSyntax");
});

test("pagination: startIndex, count, totalResults (RFC 7644 §3.4.2.4)", async () => {
  const { token } = await scimTenant();
  const call = scim(token);
  for (let i = 0; i < 5; i++)
    expect((await call("POST", "/Users", userBody(`page${i}@example.com`))).status).toBe(201);
  const filter = encodeURIComponent('userName sw "page"');
  const first = await call("GET", `/Users?filter=${filter}&startIndex=1&count=2`);
  expect(first.body).toMatchObject({ totalResults: 5, startIndex: 1, itemsPerPage: 2 });
  const third = await call("GET", `/Users?filter=${filter}&startIndex=5&count=2`);
  expect(third.body).toMatchObject({ totalResults: 5, startIndex: 5, itemsPerPage: 1 });
  const names = new Set<string>();
  for (let start = 1; start <= 5; start += 2) {
    const page = await call("GET", `/Users?filter=${filter}&startIndex=${start}&count=2`);
    for (const r of page.body.Resources as { userName: string }[]) names.add(r.userName);
  }
  expect(names.size).toBe(5);
  const none = await call("GET", `/Users?filter=${filter}&count=0`);
  expect(none.body).toMatchObject({ totalResults: 5, itemsPerPage: 0, Resources: [] });
});

test("PATCH as Okta sends it: replace active false without a path, then back", async () => {
  const { token } = await scimTenant();
  const call = scim(token);
  const { body } = await call("POST", "/Users", userBody("okta.user@example.com"));
  const id = body.id as string;
  const off = await call("PATCH", `/Users/${id}`, {
    schemas: [PATCH],
    Operations: [{ op: "replace", value: { active: false } }],
  });
  expect(off.status).toBe(200);
  expect(off.body.active).toBe(false);
  expect(
    (await call("GET", `/Users?filter=${encodeURIComponent("active eq false")}`)).body.Resources.map(
      (r: { id: string }) => r.id,
    ),
  ).toEqual([id]);
  const on = await call("PATCH", `/Users/${id}`, {
    schemas: [PATCH],
    Operations: [{ op: "replace", value: { active: true, "name.givenName": "Okta" } }],
  });
  expect(on.body.active).toBe(true);
  expect(on.body.name.givenName).toBe("Okta");
});

test('PATCH as Entra ID sends it: capitalised ops, "False" strings, filtered paths, extension URNs', async () => {
  const { token } = await scimTenant();
  const call = scim(token);
  const { body } = await call(
    "POST",
    "/Users",
    userBody("entra.user@example.com", {
      emails: [
        { value: "entra.user@example.com", type: "work", primary: true },
        { value: "home@example.net", type: "home" },
      ],
    }),
  );
  const id = body.id as string;
  const patched = await call("PATCH", `/Users/${id}`, {
    schemas: [PATCH],
    Operations: [
      { op: "Replace", path: 'emails[type eq "work"].value', value: "entra.renamed@example.com" },
      { op: "Replace", path: "userName", value: "entra.renamed@example.com" },
      {
        op: "Add",
        path: "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:department",
        value: "Sales",
      },
      { op: "Replace", path: "displayName", value: "Entra User" },
      { op: "Remove", path: 'emails[type eq "home"]' },
      { op: "Replace", path: "active", value: "False" },
    ],
  });
  expect(patched.status).toBe(200);
  expect(patched.body.userName).toBe("entra.renamed@example.com");
  expect(patched.body.emails).toEqual([{ value: "entra.renamed@example.com", type: "work", primary: true }]);
  expect(patched.body["urn:ietf:params:scim:schemas:extension:enterprise:2.0:User"]).toEqual({
    department: "Sales",
  });
  expect(patched.body.schemas).toContain("urn:ietf:params:scim:schemas:extension:enterprise:2.0:User");
  expect(patched.body.active).toBe(false);
  const back = await call("PATCH", `/Users/${id}`, {
    schemas: [PATCH],
    Operations: [{ op: "Replace", path: "active", value: "True" }],
  });
  expect(back.body.active).toBe(true);
  // malformed PATCH bodies
  expect((await call("PATCH", `/Users/${id}`, { Operations: [] })).body.scimType).toBe("invalidSyntax");
  expect(
    (await call("PATCH", `/Users/${id}`, { schemas: [PATCH], Operations: [{ op: "remove" }] })).body.scimType,
  ).toBe("noTarget");
  expect(
    (await call("PATCH", `/Users/${id}`, { schemas: [PATCH], Operations: [{ op: "move", path: "x" }] })).body
      .scimType,
  ).toBe("invalidSyntax");
});

test("deactivating a member ends its sessions; another tenant's Users are 404", async () => {
  const { tenant, token } = await scimTenant();
  const other = await scimTenant();
  const call = scim(token);
  const me = () => app.request("/api/auth/me", { headers: tenant.member.headers });
  expect((await me()).status).toBe(200);
  const off = await call("PATCH", `/Users/${tenant.member.id}`, {
    schemas: [PATCH],
    Operations: [{ op: "replace", path: "active", value: false }],
  });
  expect(off.status).toBe(200);
  expect((await me()).status).toBe(401);
  // tenant A's token never reaches tenant B's members
  const foreign = scim(other.token);
  expect((await foreign("GET", `/Users/${tenant.owner.id}`)).status).toBe(404);
  expect(
    (
      await foreign("PATCH", `/Users/${tenant.owner.id}`, {
        schemas: [PATCH],
        Operations: [{ op: "replace", path: "active", value: false }],
      })
    ).status,
  ).toBe(404);
  expect((await foreign("DELETE", `/Users/${tenant.owner.id}`)).status).toBe(404);
  expect(
    (await foreign("GET", `/Users?filter=${encodeURIComponent(`userName eq "${tenant.owner.email}"`)}`)).body
      .totalResults,
  ).toBe(0);
  // the last owner stays
  const lastOwner = await call("DELETE", `/Users/${tenant.owner.id}`);
  expect(lastOwner.status).toBe(409);
  expect(lastOwner.body.schemas).toEqual([ERROR]);
});

test("a created User takes a seat: a full plan is 403 (RFC 7644 has no 402), a plan without seats too", async () => {
  const { tenant, token } = await scimTenant();
  const call = scim(token);
  const seats = (enabled: boolean, limit: number | null) =>
    updateFeatureOverride(app.deps, systemCtx("test", tenant.id), {
      featureKey: "seats",
      enabled,
      limit,
      reason: "test",
    });
  // the tenant's three members: one seat left
  await seats(true, 4);
  const first = await call("POST", "/Users", userBody(`seat-${crypto.randomUUID()}@example.com`));
  expect(first.status).toBe(201);
  const full = await call("POST", "/Users", userBody(`seat-${crypto.randomUUID()}@example.com`));
  expect(full.status).toBe(403);
  expect(full.body.schemas).toEqual([ERROR]);
  expect(full.body.status).toBe("403");
  expect(full.body.detail).toContain('"seats" (4 seats)');
  // a User already there is still replaced: only a new member takes a seat
  const replaced = await call(
    "PUT",
    `/Users/${first.body.id}`,
    userBody(first.body.userName, { displayName: "Barbara J" }),
  );
  expect(replaced.status).toBe(200);
  await seats(false, null);
  const none = await call("POST", "/Users", userBody(`seat-${crypto.randomUUID()}@example.com`));
  expect(none.status).toBe(403);
  expect(none.body.detail).toContain("seats");
  // a free seat again
  await seats(true, 5);
  expect((await call("POST", "/Users", userBody(`seat-${crypto.randomUUID()}@example.com`))).status).toBe(
    201,
  );
});

const GROUP = "urn:ietf:params:scim:schemas:core:2.0:Group";

test("Groups: create, filter, PATCH members as Okta and Entra ID send them; a role group gives its role", async () => {
  const { tenant, token } = await scimTenant();
  const other = await scimTenant();
  const call = scim(token);
  const roleOf = async (userId: string) => {
    const users = (await (
      await app.request("/api/tenant/users", { headers: tenant.owner.headers })
    ).json()) as {
      items: { id: string; role: string }[];
    };
    return users.items.find((u) => u.id === userId)?.role;
  };
  const { body: user } = await call("POST", "/Users", userBody("grouped@example.com"));
  const userId = user.id as string;
  const created = await call("POST", "/Groups", {
    schemas: [GROUP],
    displayName: "Admins",
    externalId: "okta-admins",
    members: [{ value: userId, display: "grouped@example.com" }],
  });
  expect(created.status).toBe(201);
  expect(created.location).toEndWith(`/scim/v2/Groups/${created.body.id}`);
  expect(created.body.members).toMatchObject([{ value: userId, display: "grouped@example.com" }]);
  const groupId = created.body.id as string;
  expect(await roleOf(userId)).toBe("admin");
  expect(await roleOf(tenant.member.id)).toBe("member");
  expect((await call("POST", "/Groups", { schemas: [GROUP], displayName: "admins" })).body.scimType).toBe(
    "uniqueness",
  );

  // filter and excludedAttributes, as Entra ID reads a group
  const found = await call(
    "GET",
    `/Groups?filter=${encodeURIComponent('displayName eq "Admins"')}&excludedAttributes=members`,
  );
  expect(found.body.totalResults).toBe(1);
  expect(found.body.Resources[0].members).toBeUndefined();
  const byMember = await call(
    "GET",
    `/Groups?filter=${encodeURIComponent(`id eq "${groupId}" and members[value eq "${userId}"]`)}`,
  );
  expect(byMember.body.totalResults).toBe(1);

  // Entra ID: Add members with a path, Remove by a filtered path
  const added = await call("PATCH", `/Groups/${groupId}`, {
    schemas: [PATCH],
    Operations: [{ op: "Add", path: "members", value: [{ value: tenant.member.id }] }],
  });
  expect(added.status).toBe(200);
  expect(await roleOf(tenant.member.id)).toBe("admin");
  // the member's session now acts as an admin: the admin-only key list answers
  expect((await app.request("/api/tenant/api-keys", { headers: tenant.member.headers })).status).toBe(200);
  await call("PATCH", `/Groups/${groupId}`, {
    schemas: [PATCH],
    Operations: [{ op: "Remove", path: `members[value eq "${tenant.member.id}"]` }],
  });
  expect(await roleOf(tenant.member.id)).toBe("member");
  expect((await app.request("/api/tenant/api-keys", { headers: tenant.member.headers })).status).toBe(403);

  // Okta: rename with a value object, members added and removed
  const renamed = await call("PATCH", `/Groups/${groupId}`, {
    schemas: [PATCH],
    Operations: [{ op: "replace", value: { id: groupId, displayName: "Sales" } }],
  });
  expect(renamed.body.displayName).toBe("Sales");
  expect(await roleOf(userId)).toBe("member");
  // an unknown member and another tenant's member are refused
  const foreignMember = await call("PATCH", `/Groups/${groupId}`, {
    schemas: [PATCH],
    Operations: [{ op: "add", path: "members", value: [{ value: other.tenant.owner.id }] }],
  });
  expect(foreignMember.body).toMatchObject({ status: "400", scimType: "invalidValue" });

  // another tenant's token: 404
  const foreign = scim(other.token);
  expect((await foreign("GET", `/Groups/${groupId}`)).status).toBe(404);
  expect((await foreign("DELETE", `/Groups/${groupId}`)).status).toBe(404);
  expect((await foreign("GET", "/Groups")).body.totalResults).toBe(0);

  // the last owner keeps the role: an Owners group that loses them is refused
  const owners = await call("POST", "/Groups", {
    schemas: [GROUP],
    displayName: "Plinth Owners",
    members: [{ value: tenant.owner.id }],
  });
  expect(await roleOf(tenant.owner.id)).toBe("owner");
  const dropped = await call("PUT", `/Groups/${owners.body.id}`, {
    schemas: [GROUP],
    displayName: "Plinth Owners",
    members: [],
  });
  expect(dropped.status).toBe(409);
  expect(await roleOf(tenant.owner.id)).toBe("owner");

  // PUT replaces the members; DELETE takes the role back
  await call("PUT", `/Groups/${groupId}`, {
    schemas: [GROUP],
    displayName: "Owners",
    members: [{ value: userId }],
  });
  expect(await roleOf(userId)).toBe("owner");
  expect((await call("DELETE", `/Groups/${groupId}`)).status).toBe(204);
  expect(await roleOf(userId)).toBe("member");
  expect((await call("GET", `/Groups/${groupId}`)).status).toBe(404);
});
