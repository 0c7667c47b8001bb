import { expect, test } from "bun:test";
import { CURSOR_PATTERN } from "../../src/pagination.ts";
import { relaxedLimits, useTestApp } from "../helpers/app.ts";
import { json, newMasterKey, signedInPlatformAdmin, signedInTenant } from "../helpers/identity.ts";

const app = useTestApp({
  settings: {
    ...relaxedLimits,
    "Security:TenantSecrets:KeyId": "list-test",
    "Security:TenantSecrets:MasterKey": newMasterKey(),
    "Webhooks:AllowPrivateDestinations": "true",
  },
});

interface Schema {
  $ref?: string;
  type?: string | string[];
  properties?: Record<string, Schema>;
  required?: string[];
  default?: unknown;
  maximum?: number;
  minimum?: number;
  pattern?: string;
}
interface Parameter {
  name: string;
  in: string;
  deprecated?: boolean;
  schema: Schema;
}
interface Doc {
  paths: Record<
    string,
    Record<
      string,
      {
        operationId: string;
        parameters?: Parameter[];
        responses: Record<
          string,
          {
            content?: Record<string, { schema: Schema }>;
            links?: Record<string, { operationId: string; parameters: Record<string, string> }>;
          }
        >;
      }
    >
  >;
  components: { schemas: Record<string, Schema> };
}

test("every list takes limit (default 50, max 200) and an opaque cursor and answers { items, nextCursor }", async () => {
  const doc = (await (await app.request("/api/openapi.json")).json()) as Doc;
  const deref = (s: Schema): Schema =>
    s.$ref ? deref(doc.components.schemas[s.$ref.split("/").pop() ?? ""] ?? {}) : s;
  const lists: string[] = [];
  for (const [path, item] of Object.entries(doc.paths))
    for (const [method, op] of Object.entries(item)) {
      const body = op.responses["200"]?.content?.["application/json"]?.schema;
      const schema = body ? deref(body) : undefined;
      if (!schema?.properties?.items) continue;
      const where = `${method} ${path}`;
      lists.push(where);
      // the usage report's items are the plan's features, one per feature key, not a collection
      if (path === "/api/admin/tenants/{tenantId}/usage") continue;
      // a page may carry a summary beside it (a flow's counts), never another paging scheme
      expect(Object.keys(schema.properties), where).toEqual(expect.arrayContaining(["items", "nextCursor"]));
      expect(schema.required, where).toEqual(expect.arrayContaining(["items", "nextCursor"]));
      const query = Object.fromEntries(
        (op.parameters ?? []).filter((p) => p.in === "query").map((p) => [p.name, p]),
      );
      expect(query.limit?.schema, where).toMatchObject({ default: 50, maximum: 200, minimum: 1 });
      expect(query.cursor?.schema.pattern, where).toBe(CURSOR_PATTERN);
      // the document says where a cursor comes from: the 200's `next` link feeds `nextCursor` back
      expect(op.responses["200"]?.links?.next, where).toMatchObject({
        operationId: op.operationId,
        parameters: { cursor: "$response.body#/nextCursor" },
      });
      for (const parameter of Object.values(query))
        expect(parameter.deprecated, `${where} ${parameter.name}`).toBeUndefined();
      expect(query.offset, where).toBeUndefined();
      expect(query.before, where).toBeUndefined();
    }
  expect(lists.length).toBeGreaterThanOrEqual(18);
});

async function pages(path: string, headers: Record<string, string>, limit: number) {
  const seen: unknown[] = [];
  let cursor: string | null = null;
  let count = 0;
  do {
    const sep = path.includes("?") ? "&" : "?";
    const response = await app.request(`${path}${sep}limit=${limit}${cursor ? `&cursor=${cursor}` : ""}`, {
      headers,
    });
    expect(response.status, path).toBe(200);
    const body = (await response.json()) as { items: unknown[]; nextCursor: string | null };
    expect(body.items.length).toBeLessThanOrEqual(limit);
    seen.push(...body.items);
    cursor = body.nextCursor;
    count++;
  } while (cursor && count < 50);
  const bad = await app.request(`${path}${path.includes("?") ? "&" : "?"}cursor=garbage`, { headers });
  expect(bad.status, `${path} garbage cursor`).toBe(400);
  return seen;
}

test("the lists that were one page now page: schedules, secrets, webhook endpoints, plans", async () => {
  const admin = await signedInPlatformAdmin(app);
  const tenant = await signedInTenant(app, { plan: "enterprise" });
  const names = ["contract-a", "contract-b", "contract-c"];
  for (const name of names) {
    const put = await app.request(`/api/admin/schedules/${name}`, {
      ...json({ cron: "0 3 * * *", kind: "system.noop" }, admin.headers),
      method: "PUT",
    });
    expect(put.status).toBeLessThan(300);
  }
  const schedules = (await pages("/api/admin/schedules", admin.headers, 2)) as { name: string }[];
  expect(schedules.map((s) => s.name).filter((n) => names.includes(n))).toEqual(names);

  for (let i = 0; i < 3; i++) {
    const created = await app.request(
      "/api/tenant/webhooks",
      json({ url: `http://127.0.0.1:9/hook${i}`, events: ["user.created"] }, tenant.owner.headers),
    );
    expect(created.status).toBe(201);
  }
  const endpoints = (await pages("/api/tenant/webhooks", tenant.owner.headers, 2)) as { id: string }[];
  expect(new Set(endpoints.map((e) => e.id)).size).toBe(3);
  const adminEndpoints = await pages(`/api/admin/tenants/${tenant.id}/webhooks`, admin.headers, 1);
  expect(adminEndpoints).toHaveLength(3);

  const plans = (await pages("/api/plans", {}, 1)) as { code: string }[];
  expect(plans.length).toBeGreaterThan(1);
  expect(new Set(plans.map((p) => p.code)).size).toBe(plans.length);

  await pages(`/api/admin/tenants/${tenant.id}/secrets`, admin.headers, 1);
  await pages(`/api/admin/tenants/${tenant.id}/providers`, admin.headers, 1);
  await pages(`/api/admin/tenants/${tenant.id}/domains`, admin.headers, 1);
  await pages("/api/tenant/domains", tenant.owner.headers, 1);
});
