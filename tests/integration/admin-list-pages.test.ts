import { expect, test } from "bun:test";
import { useTestApp } from "../helpers/app.ts";
import { createTenant, signedInPlatformAdmin } from "../helpers/identity.ts";

const app = useTestApp();

let headers: Record<string, string> | undefined;
/** One platform administrator per file: signed in once, its headers reused. */
async function adminHeaders() {
  headers ??= (await signedInPlatformAdmin(app)).headers;
  return headers;
}

test("/api/admin/tenants pages by cursor as every list does", async () => {
  const admin = await adminHeaders();
  for (let i = 0; i < 5; i++) await createTenant(app.db);
  const seen: string[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const query: string = cursor ? `&cursor=${cursor}` : "";
    const response = await app.request(`/api/admin/tenants?limit=2${query}`, { headers: admin });
    expect(response.status).toBe(200);
    const body = (await response.json()) as { items: { code: string }[]; nextCursor: string | null };
    seen.push(...body.items.map((t) => t.code));
    cursor = body.nextCursor;
    pages++;
  } while (cursor);
  expect(seen.length).toBe(5);
  expect(seen).toEqual([...seen].sort());
  expect(pages).toBe(3);

  // a cursor that is not one of this list's is a 400 naming `cursor`: empty, not base64url JSON,
  // JSON of the wrong shape (`YQBi` is "a\0b"), or another list's
  const jobs = (await (await app.request("/api/admin/jobs?limit=1", { headers: admin })).json()) as {
    nextCursor: string | null;
  };
  const otherList = Buffer.from(JSON.stringify({ id: 1 })).toString("base64url");
  for (const cursor of ["", "YQBi", "garbage", "12345", otherList, jobs.nextCursor ?? otherList]) {
    const bad = await app.request(`/api/admin/tenants?cursor=${cursor}`, { headers: admin });
    expect(bad.status, cursor).toBe(400);
    const problem = (await bad.json()) as { code: string; errors: { path: string }[] };
    expect(problem.code).toBe("validation_failed");
    expect(problem.errors.map((e) => e.path)).toEqual(["cursor"]);
  }
});

test("subscription history pages by cursor too; an unpaged list answers nextCursor null", async () => {
  const admin = await adminHeaders();
  const tenant = await createTenant(app.db);
  const post = (event: Record<string, string>) =>
    app.request(`/api/admin/tenants/${tenant.id}/subscription/events`, {
      method: "POST",
      headers: { ...admin, "content-type": "application/json" },
      body: JSON.stringify(event),
    });
  expect((await post({ event: "activate", plan: "pro" })).status).toBe(200);
  expect((await post({ event: "change_plan", plan: "enterprise" })).status).toBe(200);
  expect((await post({ event: "change_plan", plan: "pro" })).status).toBe(200);
  const events: string[] = [];
  let cursor: string | null = null;
  do {
    const query: string = cursor ? `&cursor=${cursor}` : "";
    const response = await app.request(
      `/api/admin/tenants/${tenant.id}/subscription/history?limit=2${query}`,
      { headers: admin },
    );
    const body = (await response.json()) as { items: { event: string }[]; nextCursor: string | null };
    events.push(...body.items.map((h) => h.event));
    cursor = body.nextCursor;
  } while (cursor);
  expect(events).toEqual(["change_plan", "change_plan", "activate"]);

  const secrets = (await (
    await app.request(`/api/admin/tenants/${tenant.id}/secrets`, { headers: admin })
  ).json()) as {
    nextCursor: unknown;
  };
  expect(secrets.nextCursor).toBeNull();
});
