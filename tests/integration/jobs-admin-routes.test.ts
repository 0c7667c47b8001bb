import { beforeAll, describe, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { z } from "zod";
import { ManualClock } from "../../src/clock.ts";
import { execute } from "../../src/db/client.ts";
import type { Deps } from "../../src/deps.ts";
import type { createRouter } from "../../src/http/request-context.ts";
import { adminJobRoutes } from "../../src/http/routes/admin-jobs.ts";
import { claimJobs } from "../../src/jobs/claim.ts";
import { enqueue } from "../../src/jobs/enqueue.ts";
import { defineJob } from "../../src/jobs/registry.ts";
import { platformAdminRoutes } from "../helpers/admin-routes.ts";
import { testConfig, testDeps, useTestDatabase } from "../helpers/app.ts";

const mail = defineJob("admin.mail", z.object({ to: z.string() }), () => {});
const report = defineJob("admin.report", z.object({}), () => {});

let deps: Deps;
let app: ReturnType<typeof createRouter>;
const clock = new ManualClock("2030-03-01T00:00:00Z");
let deadId: number;
let pendingId: number;

const t = useTestDatabase();
beforeAll(async () => {
  deps = await testDeps(testConfig(), { database: t.database, clock });
  app = platformAdminRoutes(deps, adminJobRoutes(deps));
  for (let i = 0; i < 3; i++) await enqueue(t.database.db, { clock }, mail, { to: `u${i}@example.com` });
  pendingId = (await enqueue(t.database.db, { clock }, report, {})).id;
  deadId = (await enqueue(t.database.db, { clock }, mail, { to: "dead@example.com" })).id;
  await execute(
    t.database.db,
    sql`update background_jobs set status = 'dead', attempts = 10, last_error = 'gave up', finished_at = now() where id = ${deadId}`,
  );
});

const get = (path: string) => app.request(path);

describe("admin job routes", () => {
  test("lists by kind and status with a cursor", async () => {
    const first = await get("/api/admin/jobs?kind=admin.mail&status=pending&limit=2");
    expect(first.status).toBe(200);
    const page1 = (await first.json()) as { items: { id: number; kind: string }[]; nextCursor: string };
    expect(page1.items).toHaveLength(2);
    expect(page1.items.every((j) => j.kind === "admin.mail")).toBe(true);
    const second = (await (
      await get(`/api/admin/jobs?kind=admin.mail&status=pending&limit=2&cursor=${page1.nextCursor}`)
    ).json()) as {
      items: { id: number }[];
      nextCursor: string | null;
    };
    expect(second.items).toHaveLength(1);
    expect(second.nextCursor).toBeNull();
    const dead = (await (await get("/api/admin/jobs?status=dead")).json()) as {
      items: { id: number; lastError: string }[];
    };
    expect(dead.items.map((j) => j.id)).toEqual([deadId]);
    expect(dead.items[0]?.lastError).toBe("gave up");
  });

  test("rejects an unknown status or a bad cursor with a 400 problem", async () => {
    for (const path of [
      "/api/admin/jobs?status=sleeping",
      "/api/admin/jobs?cursor=abc",
      "/api/admin/jobs?limit=0",
    ]) {
      const res = await get(path);
      expect(res.status).toBe(400);
      expect(res.headers.get("content-type")).toContain("application/problem+json");
      expect(((await res.json()) as { code: string }).code).toBe("validation_failed");
    }
  });

  test("shows one job; an unknown id is a 404 problem", async () => {
    const res = await get(`/api/admin/jobs/${pendingId}`);
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({
      id: pendingId,
      kind: "admin.report",
      status: "pending",
      attempts: 0,
    });
    const missing = await get("/api/admin/jobs/987654321");
    expect(missing.status).toBe(404);
    expect(missing.headers.get("content-type")).toContain("application/problem+json");
    expect(await missing.json()).toMatchObject({ code: "not_found", status: 404 });
    expect((await get("/api/admin/jobs/not-a-number")).status).toBe(400);
  });

  test("retries a dead job; a job that is not dead is a 409; an unknown one a 404", async () => {
    const res = await app.request(`/api/admin/jobs/${deadId}/retry`, { method: "POST" });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({
      id: deadId,
      status: "pending",
      attempts: 0,
      finishedAt: null,
      runAfter: clock.now().toISOString(),
    });
    const again = await app.request(`/api/admin/jobs/${deadId}/retry`, { method: "POST" });
    expect(again.status).toBe(409);
    expect(await again.json()).toMatchObject({ code: "conflict" });
    const missing = await app.request("/api/admin/jobs/987654321/retry", { method: "POST" });
    expect(missing.status).toBe(404);
  });
});

describe("admin job priority", () => {
  test("a pending or failed job's priority changes and the next claim honours it; running or dead is a 409", async () => {
    const kind = defineJob("admin.prio", z.object({ n: z.number() }), () => {});
    const ids: number[] = [];
    for (let n = 0; n < 3; n++) ids.push((await enqueue(t.database.db, { clock }, kind, { n })).id);
    const last = ids[2] as number;
    const patch = (id: number, body: unknown) =>
      app.request(`/api/admin/jobs/${id}`, {
        method: "PATCH",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      });
    const res = await patch(last, { priority: 3 });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ id: last, priority: 3, status: "pending", groupKey: null });
    const [first] = await claimJobs(t.database.db, {
      workerId: "w",
      kinds: [kind.kind],
      limit: 1,
      now: clock.now(),
    });
    expect(first?.id).toBe(last);
    // running now: the priority can no longer change
    const running = await patch(last, { priority: 0 });
    expect(running.status).toBe(409);
    expect(await running.json()).toMatchObject({ code: "conflict" });
    // a failed job awaiting its retry can
    await execute(t.database.db, sql`update background_jobs set status = 'failed' where id = ${ids[0]}`);
    expect((await patch(ids[0] as number, { priority: -2 })).status).toBe(200);
    await execute(
      t.database.db,
      sql`update background_jobs set status = 'dead', finished_at = now() where id = ${ids[1]}`,
    );
    expect((await patch(ids[1] as number, { priority: 1 })).status).toBe(409);
    expect((await patch(987654321, { priority: 1 })).status).toBe(404);
    expect((await patch(last, { level: 1 })).status).toBe(400);
  });
});
