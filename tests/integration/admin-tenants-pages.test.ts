import { expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import { users } from "../../src/db/schema/index.ts";
import { useTestApp } from "../helpers/app.ts";
import { createPlatformAdmin, createTenant, loginTokens } from "../helpers/identity.ts";

const app = useTestApp();

async function adminHeaders() {
  const admin = await createPlatformAdmin(app.db);
  await app.db.update(users).set({ mustChangePassword: false }).where(eq(users.id, admin.id));
  return { authorization: `Bearer ${(await loginTokens(app, { email: admin.email })).accessToken}` };
}

test("/api/admin/tenants pages by cursor as every list does; offset is still accepted", async () => {
  const headers = await adminHeaders();
  for (let i = 0; i < 5; i++) await createTenant(app.db);
  const seen: string[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const query: string = cursor ? `&cursor=${cursor}` : "";
    const response = await app.request(`/api/admin/tenants?limit=2${query}`, { headers });
    expect(response.status).toBe(200);
    const body = (await response.json()) as { items: { code: string }[]; nextCursor: string | null };
    seen.push(...body.items.map((t) => t.code));
    cursor = body.nextCursor;
    pages++;
  } while (cursor);
  expect(seen.length).toBe(5);
  expect(seen).toEqual([...seen].sort());
  expect(pages).toBe(3);

  const byOffset = (await (await app.request("/api/admin/tenants?limit=2&offset=2", { headers })).json()) as {
    items: { code: string }[];
  };
  expect(byOffset.items.map((t) => t.code)).toEqual(seen.slice(2, 4));

  const bad = await app.request("/api/admin/tenants?cursor=", { headers });
  expect(bad.status).toBe(400);
});
