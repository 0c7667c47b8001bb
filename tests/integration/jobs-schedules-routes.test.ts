import { beforeAll, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { ManualClock } from "../../src/clock.ts";
import { execute } from "../../src/db/client.ts";
import { API_CRON_PATTERN } from "../../src/jobs/cron-pattern.ts";
import { relaxedLimits, useTestApp } from "../helpers/app.ts";
import { bearer, signedInPlatformAdmin, signedInTenant } from "../helpers/identity.ts";

const clock = new ManualClock("2030-05-01T08:00:00Z");
const app = useTestApp({ settings: { ...relaxedLimits }, clock });
const t = app.testDatabase;
let admin: string;
let owner: string;

beforeAll(async () => {
  admin = (await signedInPlatformAdmin(app)).accessToken;
  owner = (await signedInTenant(app)).owner.accessToken;
});

const put = (name: string, body: unknown, token = admin) =>
  app.request(`/api/admin/schedules/${name}`, {
    method: "PUT",
    ...bearer(token, { "content-type": "application/json" }),
    body: JSON.stringify(body),
  });

interface Problem {
  errors?: { path: string }[];
}

test("an invalid cron or time zone is a 400 naming the field", async () => {
  const badCron = await put("bad", { cron: "61 * * * *", kind: "system.noop" });
  expect(badCron.status).toBe(400);
  expect(((await badCron.json()) as Problem).errors?.map((e) => e.path)).toEqual(["cron"]);
  const sevenFields = await put("bad", { cron: "0 0 0 * * * 2030", kind: "system.noop" });
  expect(sevenFields.status).toBe(400);
  const badZone = await put("bad", { cron: "0 3 * * *", timeZone: "Mars/Olympus", kind: "system.noop" });
  expect(badZone.status).toBe(400);
  expect(((await badZone.json()) as Problem).errors?.map((e) => e.path)).toEqual(["timeZone"]);
  const badPolicy = await put("bad", { cron: "0 3 * * *", kind: "system.noop", catchUp: "sometimes" });
  expect(badPolicy.status).toBe(400);
  expect(JSON.stringify(await badPolicy.json())).toContain("catchUp");
  expect((await app.request("/api/admin/schedules", bearer(admin))).status).toBe(200);
});

test("through the API a schedule runs at most once a minute: a seconds field of more than one value is a 400 naming cron", async () => {
  for (const cron of ["* * * * * *", "*/10 * * * * *", "0,30 * * * * *"]) {
    const perSecond = await put("per-second", { cron, kind: "system.noop" });
    expect(perSecond.status, cron).toBe(400);
    expect(
      ((await perSecond.json()) as Problem).errors?.map((e) => e.path),
      cron,
    ).toEqual(["cron"]);
  }
  // one seconds value is a slot a minute (or fewer)
  expect((await put("on-the-half-minute", { cron: "30 * * * * *", kind: "system.noop" })).status).toBe(201);
  const doc = (await (await app.request("/api/openapi.json")).json()) as {
    components: { schemas: Record<string, { properties: Record<string, { pattern?: string }> }> };
  };
  expect(doc.components.schemas.JobScheduleInput?.properties.cron?.pattern).toBe(
    new RegExp(API_CRON_PATTERN).source,
  );
});

test("a kind no handler is registered for is a 400 naming kind and the known kinds; nothing is stored", async () => {
  const unknown = await put("nope", { cron: "* * * * *", kind: "nope.kind" });
  expect(unknown.status).toBe(400);
  const problem = (await unknown.json()) as { errors: { path: string; message: string }[] };
  expect(problem.errors.map((e) => e.path)).toEqual(["kind"]);
  expect(problem.errors[0]?.message).toContain("system.noop");
  const listed = (await (await app.request("/api/admin/schedules?limit=200", bearer(admin))).json()) as {
    items: { name: string }[];
  };
  expect(listed.items.map((s) => s.name)).not.toContain("nope");
});

test("create, list with next runs, replace, delete", async () => {
  const created = await put("nightly", {
    cron: "0 30 2 * * *",
    timeZone: "Europe/Berlin",
    kind: "system.noop",
    payload: { report: "daily" },
    catchUp: "once",
  });
  expect(created.status).toBe(201);
  const replaced = await put("nightly", {
    cron: "0 3 * * *",
    timeZone: "Europe/Berlin",
    kind: "system.noop",
  });
  expect(replaced.status).toBe(200);
  const list = await app.request("/api/admin/schedules", bearer(admin));
  const { items } = (await list.json()) as {
    items: { name: string; cron: string; catchUp: string; payload: unknown; nextRuns: string[] }[];
  };
  const nightly = items.find((s) => s.name === "nightly");
  expect(nightly).toMatchObject({ cron: "0 3 * * *", catchUp: "skip", payload: {} });
  // 03:00 CEST
  expect(nightly?.nextRuns).toEqual([
    "2030-05-02T01:00:00.000Z",
    "2030-05-03T01:00:00.000Z",
    "2030-05-04T01:00:00.000Z",
  ]);
  const del = { method: "DELETE", ...bearer(admin) };
  expect((await app.request("/api/admin/schedules/nightly", del)).status).toBe(204);
  expect((await app.request("/api/admin/schedules/nightly", del)).status).toBe(404);
});

test("run now enqueues one job of the schedule's kind and payload, 202 with its id", async () => {
  await put("on-demand", { cron: "0 0 1 1 *", kind: "system.noop", payload: { x: 1 } });
  const post = { method: "POST", ...bearer(admin) };
  const response = await app.request("/api/admin/schedules/on-demand/run", post);
  expect(response.status).toBe(202);
  const { jobId } = (await response.json()) as { jobId: number };
  const [job] = await execute<{ kind: string; payload: unknown; dedup_key: string }>(
    t.database.db,
    sql`select kind, payload, dedup_key from background_jobs where id = ${jobId}`,
  );
  expect(job).toEqual({
    kind: "system.noop",
    payload: { x: 1 },
    dedup_key: "schedule:on-demand:run:2030-05-01T08:00:00.000Z",
  });
  expect((await app.request("/api/admin/schedules/missing/run", post)).status).toBe(404);
});

test("schedules are closed to tenant users and anonymous callers", async () => {
  expect((await app.request("/api/admin/schedules", bearer(owner))).status).toBe(403);
  expect((await app.request("/api/admin/schedules")).status).toBe(401);
  expect((await put("x", { cron: "* * * * *", kind: "system.noop" }, owner)).status).toBe(403);
});
