import { beforeAll, describe, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { z } from "zod";
import { ManualClock } from "../../src/clock.ts";
import { execute } from "../../src/db/client.ts";
import { BULK_BATCH_SIZE } from "../../src/jobs/admin/bulk-batches.ts";
import { claimJobs } from "../../src/jobs/claim.ts";
import { type EnqueueItem, enqueue, enqueueMany, JOB_CANCEL_CHANNEL } from "../../src/jobs/enqueue.ts";
import { completeJobs } from "../../src/jobs/outcomes.ts";
import { createJobRegistry, defineJob, MAX_PROGRESS_BYTES } from "../../src/jobs/registry.ts";
import { runJob } from "../../src/jobs/run-job.ts";
import { relaxedLimits, useTestApp } from "../helpers/app.ts";
import { json, signedInPlatformAdmin } from "../helpers/identity.ts";
import { jobRow, waitFor } from "../helpers/jobs.ts";

/** The admin job API at scale, through the real app (every answer checked against the document). */

const clock = new ManualClock(Date.now());
const app = useTestApp({ clock, settings: { ...relaxedLimits } });

const mail = defineJob("bulk.mail", z.object({ n: z.number() }), () => {});
const report = defineJob("bulk.report", z.object({ n: z.number() }), () => {});
const single = defineJob("bulk.single", z.object({ n: z.number() }), () => {});
const running = defineJob("bulk.running", z.object({ n: z.number() }), () => {});
const batch = defineJob("bulk.batch", z.object({ n: z.number() }), () => {});

let admin: Record<string, string>;
let adminId: string;
beforeAll(async () => {
  const platformAdmin = await signedInPlatformAdmin(app);
  adminId = platformAdmin.id;
  admin = platformAdmin.headers;
});

const tenant = () => crypto.randomUUID();
const ctx = { clock };

interface Page {
  items: { id: number; kind: string; status: string; groupKey: string | null; createdAt: string }[];
  nextCursor: string | null;
}

async function get(path: string): Promise<Response> {
  return app.request(path, { headers: admin });
}

async function pages(query: string, limit: number): Promise<{ ids: number[]; pages: Page[] }> {
  const all: Page[] = [];
  let cursor: string | null = null;
  do {
    const response = await get(`/api/admin/jobs?${query}&limit=${limit}${cursor ? `&cursor=${cursor}` : ""}`);
    expect(response.status).toBe(200);
    const page = (await response.json()) as Page;
    all.push(page);
    cursor = page.nextCursor;
  } while (cursor);
  return { ids: all.flatMap((p) => p.items.map((i) => i.id)), pages: all };
}

const post = (path: string, body: unknown) => app.request(path, json(body, admin));

function actions(): Record<string, unknown>[] {
  return app.logs
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .filter((l) => l.msg === "job admin action");
}

describe("GET /api/admin/jobs filters", () => {
  test("group, kind, status and a creation window, paged by cursor; one group never shows another's jobs", async () => {
    const a = tenant();
    const b = tenant();
    const start = clock.now().getTime();
    const idsA: number[] = [];
    for (let i = 0; i < 7; i++) {
      clock.set(start + i * 60_000);
      idsA.push((await enqueue(app.db, ctx, i % 2 ? report : mail, { n: i }, { tenantId: a })).id);
      await enqueue(app.db, ctx, mail, { n: i }, { tenantId: b });
    }
    clock.set(start); // the admin's token stays valid
    const byGroup = await pages(`group=${a}`, 3);
    expect(byGroup.pages).toHaveLength(3);
    expect(byGroup.ids).toEqual([...idsA].reverse()); // newest first, each once
    expect(byGroup.pages.flatMap((p) => p.items).every((j) => j.groupKey === a)).toBe(true);

    const mails = await pages(`group=${a}&kind=bulk.mail`, 2);
    expect(mails.ids).toEqual([6, 4, 2, 0].map((i) => idsA[i] as number));

    // [from, to): minutes 2, 3 and 4
    const from = new Date(start + 2 * 60_000).toISOString();
    const to = new Date(start + 5 * 60_000).toISOString();
    const window = await pages(`group=${a}&createdFrom=${from}&createdTo=${to}`, 50);
    expect(window.ids).toEqual([4, 3, 2].map((i) => idsA[i] as number));

    await app.request(`/api/admin/jobs/${idsA[0]}/cancel`, { method: "POST", headers: admin });
    const canceled = await pages(`group=${a}&status=canceled`, 50);
    expect(canceled.ids).toEqual(idsA.slice(0, 1));
    expect((await pages(`group=${b}&status=canceled`, 50)).ids).toEqual([]);
  });

  test("a bad date, an empty group or an unknown status is a 400 naming the field", async () => {
    for (const [query, field] of [
      ["createdFrom=yesterday", "createdFrom"],
      ["group=", "group"],
      ["status=paused", "status"],
    ] as const) {
      const response = await get(`/api/admin/jobs?${query}`);
      expect(response.status).toBe(400);
      const body = (await response.json()) as { code: string; errors: { path: string }[] };
      expect(body.code).toBe("validation_failed");
      expect(body.errors.map((e) => e.path)).toContain(field);
    }
  });

  test("the group filter reads the group index, not the finished rows", async () => {
    const g = tenant();
    // 50,000 finished rows of other groups, 20 of this one
    await execute(
      app.db,
      sql`insert into background_jobs (kind, status, group_key, finished_at)
          select 'bulk.old', 'succeeded', 'other-' || (n % 100), now() from generate_series(1, 50000) n`,
    );
    for (let i = 0; i < 20; i++) await enqueue(app.db, ctx, mail, { n: i }, { tenantId: g });
    await execute(app.db, sql`analyze background_jobs`);
    const plan = await execute<{ "QUERY PLAN": string }>(
      app.db,
      sql`explain select * from background_jobs where group_key = ${g} order by id desc limit 51`,
    );
    const text = plan.map((r) => r["QUERY PLAN"]).join("\n");
    expect(text).toContain("background_jobs_group_idx");
    expect(text).not.toContain("Seq Scan");
    // a bulk action's batch by group
    const batch = await execute<{ "QUERY PLAN": string }>(
      app.db,
      sql`explain select id from background_jobs
          where group_key = ${g} and status in ('pending', 'failed', 'processing') and id > 0
          order by id limit 500 for update`,
    );
    const batchText = batch.map((r) => r["QUERY PLAN"]).join("\n");
    expect(batchText).toContain("background_jobs_group_idx");
    expect(batchText).not.toContain("Seq Scan");
    await execute(app.db, sql`delete from background_jobs where kind = 'bulk.old'`);
  });
});

describe("cancel one job", () => {
  test("a pending job is canceled at once and never claimed; a finished one is a 409; unknown a 404", async () => {
    const { id } = await enqueue(app.db, ctx, single, { n: 1 });
    const response = await app.request(`/api/admin/jobs/${id}/cancel`, { method: "POST", headers: admin });
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({
      id,
      status: "canceled",
      finishedAt: clock.now().toISOString(),
    });
    clock.advance(1_000);
    expect(
      await claimJobs(app.db, { workerId: "w", kinds: [single.kind], limit: 10, now: clock.now() }),
    ).toEqual([]);
    const again = await app.request(`/api/admin/jobs/${id}/cancel`, { method: "POST", headers: admin });
    expect(again.status).toBe(409);
    expect(((await again.json()) as { detail: string }).detail).toContain("canceled");
    expect(
      (await app.request("/api/admin/jobs/987654321/cancel", { method: "POST", headers: admin })).status,
    ).toBe(404);
    // a canceled job can be retried
    const retried = await app.request(`/api/admin/jobs/${id}/retry`, { method: "POST", headers: admin });
    expect(retried.status).toBe(200);
    expect(await retried.json()).toMatchObject({ status: "pending", attempts: 0, finishedAt: null });
    await app.request(`/api/admin/jobs/${id}/cancel`, { method: "POST", headers: admin });
    const line = actions().find((l) => l.jobId === id && l.action === "cancel");
    expect(line).toMatchObject({ actor: { type: "user", userId: adminId }, action: "cancel", count: 1 });
  });

  test("a processing job: canceled, its process told by NOTIFY (id:attempts), its late success fenced out", async () => {
    const heard: string[] = [];
    const unlisten = await app.testDatabase.database.listen(JOB_CANCEL_CHANNEL, (p) => heard.push(p));
    try {
      const { id } = await enqueue(app.db, ctx, running, { n: 1 });
      const [job] = await claimJobs(app.db, {
        workerId: "w1",
        kinds: [running.kind],
        limit: 1,
        now: clock.now(),
      });
      expect(job?.id).toBe(id);
      const response = await app.request(`/api/admin/jobs/${id}/cancel`, { method: "POST", headers: admin });
      expect(await response.json()).toMatchObject({ status: "canceled", lockedBy: null });
      await waitFor(() => heard.includes(`${id}:1`), { what: "the cancel NOTIFY" });
      expect(
        await completeJobs(app.db, { workerId: "w1", jobs: [{ id, attempts: 1 }], now: clock.now() }),
      ).toEqual([]);
      expect((await jobRow(app.testDatabase.database, id)).status).toBe("canceled");
      // nor does the expired-lease branch of the claim take it
      const later = new Date(clock.now().getTime() + 10 * 60_000);
      expect(
        await claimJobs(app.db, { workerId: "w2", kinds: [running.kind], limit: 10, now: later }),
      ).toEqual([]);
    } finally {
      await unlisten();
    }
  });
});

describe("bulk actions", () => {
  test(`bulk cancel by group acts in batches of ${BULK_BATCH_SIZE}, on unfinished jobs of that group only`, async () => {
    const big = tenant();
    const other = tenant();
    const n = BULK_BATCH_SIZE * 2 + 37;
    const items: EnqueueItem[] = Array.from({ length: n }, (_, i) => ({
      job: batch,
      payload: { n: i },
      options: { tenantId: big },
    }));
    const ids = await enqueueMany(app.db, ctx, items);
    // some already finished or running; another group's jobs are left alone
    await execute(
      app.db,
      sql`update background_jobs set status = 'succeeded', finished_at = now() where id in (${ids[0]}, ${ids[1]})`,
    );
    const running = await claimJobs(app.db, {
      workerId: "w",
      kinds: [batch.kind],
      limit: 3,
      now: clock.now(),
    });
    const otherId = (await enqueue(app.db, ctx, batch, { n: 0 }, { tenantId: other })).id;

    const response = await post("/api/admin/jobs/cancel", { group: big });
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ changed: n - 2 });
    const [counts] = await execute<{ canceled: number; succeeded: number }>(
      app.db,
      sql`select count(*) filter (where status = 'canceled')::int as canceled,
                 count(*) filter (where status = 'succeeded')::int as succeeded
          from background_jobs where group_key = ${big}`,
    );
    expect(counts).toEqual({ canceled: n - 2, succeeded: 2 });
    expect(running.every((j) => j.id !== otherId)).toBe(true);
    expect((await jobRow(app.testDatabase.database, otherId)).status).toBe("pending");
    const line = actions().find(
      (l) => l.action === "bulk-cancel" && (l.filter as { group?: string }).group === big,
    );
    expect(line).toMatchObject({
      actor: { type: "user", userId: adminId },
      count: n - 2,
      filter: { group: big },
    });

    // again: nothing left to cancel
    expect(await (await post("/api/admin/jobs/cancel", { group: big })).json()).toEqual({ changed: 0 });
  });

  test("bulk retry brings back dead and canceled jobs of a kind, due now; a dedup key held elsewhere stays", async () => {
    const g = tenant();
    const ids: number[] = [];
    for (let i = 0; i < 6; i++) ids.push((await enqueue(app.db, ctx, report, { n: i }, { tenantId: g })).id);
    const [d0, d1, c0, c1, stillPending] = ids as [number, number, number, number, number, number];
    await execute(
      app.db,
      sql`update background_jobs set status = 'dead', attempts = 10, finished_at = now() where id in (${d0}, ${d1})`,
    );
    await post("/api/admin/jobs/cancel", { group: g, status: "pending", createdTo: "2999-01-01T00:00:00Z" });
    // the cancel took c0, c1, stillPending and the sixth; put two of them back as they were
    await execute(
      app.db,
      sql`update background_jobs set status = 'pending', finished_at = null where id in (${stillPending}, ${ids[5]})`,
    );
    // a dead job whose dedup key a pending job holds cannot come back
    const held = (await enqueue(app.db, ctx, report, { n: 99 }, { tenantId: g, dedupKey: "report:held" })).id;
    await execute(
      app.db,
      sql`update background_jobs set status = 'dead', finished_at = now() where id = ${held}`,
    );
    await enqueue(app.db, ctx, report, { n: 100 }, { tenantId: g, dedupKey: "report:held" });

    const response = await post("/api/admin/jobs/retry", { group: g, kind: "bulk.report" });
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ changed: 4 });
    for (const id of [d0, d1, c0, c1])
      expect(await jobRow(app.testDatabase.database, id)).toMatchObject({ status: "pending", attempts: 0 });
    expect((await jobRow(app.testDatabase.database, held)).status).toBe("dead");
    expect(actions().find((l) => l.action === "bulk-retry")).toMatchObject({
      count: 4,
      filter: { group: g, kind: "bulk.report" },
    });
  });

  test("a bulk action needs a filter, and a status it can act on", async () => {
    for (const [path, body, field] of [
      ["/api/admin/jobs/cancel", {}, ""],
      ["/api/admin/jobs/retry", {}, ""],
      ["/api/admin/jobs/cancel", { status: "succeeded" }, "status"],
      ["/api/admin/jobs/retry", { status: "pending" }, "status"],
      ["/api/admin/jobs/cancel", { group: "x", extra: 1 }, ""],
    ] as const) {
      const response = await post(path, body);
      expect(response.status).toBe(400);
      const problem = (await response.json()) as { code: string; errors?: { path: string }[] };
      expect(problem.code).toBe("validation_failed");
      if (field) expect(problem.errors?.map((e) => e.path)).toContain(field);
    }
  });
});

describe("progress", () => {
  test("a handler's progress shows in the admin view; a value over the cap is refused", async () => {
    let release = () => {};
    let refused: unknown;
    const step = defineJob("bulk.progress", z.object({}), async (_p, c) => {
      await c.progress({ done: 1, of: 3 });
      await c.progress({ done: 2, of: 3 });
      refused = await c.progress({ blob: "x".repeat(MAX_PROGRESS_BYTES) }).catch((e: unknown) => e);
      await new Promise<void>((r) => (release = r));
    });
    const { id } = await enqueue(app.db, ctx, step, {});
    const [job] = await claimJobs(app.db, { workerId: "p", kinds: [step.kind], limit: 1, now: clock.now() });
    if (!job) throw new Error("not claimed");
    const deps = app.deps;
    const outcome = runJob(
      { db: app.db, clock, logger: deps.logger, redactor: deps.redactor },
      { job, workerId: "p", registry: createJobRegistry([step]) },
    );
    await waitFor(() => refused !== undefined, { what: "the refused progress" });
    expect(refused).toBeInstanceOf(RangeError);
    expect(String(refused)).toContain(`at most ${MAX_PROGRESS_BYTES}`);
    const view = (await (await get(`/api/admin/jobs/${id}`)).json()) as { progress: unknown };
    expect(view.progress).toEqual({ done: 2, of: 3 });
    release();
    expect(await outcome).toBe("succeeded");
    const listed = (await (await get(`/api/admin/jobs?kind=bulk.progress`)).json()) as Page & {
      items: { progress: unknown }[];
    };
    expect(listed.items[0]?.progress).toEqual({ done: 2, of: 3 });
  });
});
