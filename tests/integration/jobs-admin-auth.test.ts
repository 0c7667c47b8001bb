import { beforeAll, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { execute } from "../../src/db/client.ts";
import { relaxedLimits, useTestApp } from "../helpers/app.ts";
import { bearer, signedInPlatformAdmin, signedInTenant } from "../helpers/identity.ts";

let admin: string;
let owner: string;
let deadId: number;

const app = useTestApp({ settings: { ...relaxedLimits } });
const t = app.testDatabase;
beforeAll(async () => {
  admin = (await signedInPlatformAdmin(app)).accessToken;
  owner = (await signedInTenant(app)).owner.accessToken;
  const [row] = await execute<{ id: number }>(
    t.database.db,
    sql`insert into background_jobs (kind, status, attempts, max_attempts, last_error, finished_at)
        values ('system.noop', 'dead', 10, 10, 'gave up', now()) returning id`,
  );
  deadId = Number(row?.id);
});

test("platform administrators list, inspect and retry dead jobs through the real app", async () => {
  const list = await app.request("/api/admin/jobs?status=dead", bearer(admin));
  expect(list.status).toBe(200);
  const { items } = (await list.json()) as { items: { id: number }[] };
  expect(items.map((j) => Number(j.id))).toContain(deadId);
  expect((await app.request(`/api/admin/jobs/${deadId}`, bearer(admin))).status).toBe(200);
  const retry = await app.request(`/api/admin/jobs/${deadId}/retry`, { method: "POST", ...bearer(admin) });
  expect(retry.status).toBe(200);
  const [job] = await execute<{ status: string }>(
    t.database.db,
    sql`select status from background_jobs where id = ${deadId}`,
  );
  expect(job?.status).toBe("pending");
});

test("job administration is closed to tenant users and to anonymous callers", async () => {
  expect((await app.request("/api/admin/jobs", bearer(owner))).status).toBe(403);
  expect((await app.request("/api/admin/jobs")).status).toBe(401);
  expect(
    (await app.request(`/api/admin/jobs/${deadId}/retry`, { method: "POST", ...bearer(owner) })).status,
  ).toBe(403);
});

test("an administrator changes a waiting job's priority through the real app; 409 once it ran, 404 unknown", async () => {
  const [row] = await execute<{ id: number }>(
    t.database.db,
    sql`insert into background_jobs (kind, group_key) values ('system.noop', 'tenant-x') returning id`,
  );
  const id = Number(row?.id);
  const patch = (jobId: number, body: unknown, token = admin) =>
    app.request(`/api/admin/jobs/${jobId}`, {
      method: "PATCH",
      headers: { ...bearer(token).headers, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
  const res = await patch(id, { priority: 7 });
  expect(res.status).toBe(200);
  expect(await res.json()).toMatchObject({ id, priority: 7, groupKey: "tenant-x", status: "pending" });
  expect((await patch(id, { priority: 7 }, owner)).status).toBe(403);
  expect((await patch(id, { priority: 1.5 })).status).toBe(400);
  expect((await patch(id, { priority: 40_000 })).status).toBe(400);
  await execute(
    t.database.db,
    sql`update background_jobs set status = 'succeeded', finished_at = now() where id = ${id}`,
  );
  const finished = await patch(id, { priority: 1 });
  expect(finished.status).toBe(409);
  expect(await finished.json()).toMatchObject({ code: "conflict" });
  expect((await patch(987654321, { priority: 1 })).status).toBe(404);
});
