import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { sql } from "drizzle-orm";
import { auditRowHash, GENESIS_HASH } from "../../src/audit/chain.ts";
import { auditPruneWorker } from "../../src/audit/prune-job.ts";
import { recordAudit } from "../../src/audit/record.ts";
import { pruneAuditEvents } from "../../src/audit/retention.ts";
import { verifyAuditChains } from "../../src/audit/verify-chains.ts";
import { ManualClock, systemClock } from "../../src/clock.ts";
import { systemCtx } from "../../src/context.ts";
import { execute } from "../../src/db/client.ts";
import { bindJob } from "../../src/jobs/registry.ts";
import { seedSchedules } from "../../src/jobs/schedules.ts";
import { AUDIT_PRUNE_SCHEDULE } from "../../src/loops/api-background.ts";
import { createTenant } from "../../src/tenancy/tenants.ts";
import { testConfig, testDeps, useTestDatabase } from "../helpers/app.ts";

const root = join(import.meta.dir, "../..");
const t = useTestDatabase({ poolSize: 12 });
const db = () => t.database.db;

type EventRow = { id: string; tenant_id: string | null; prev_hash: string; hash: string; action: string };
const rowsOf = (tenantId: string) =>
  execute<EventRow>(
    db(),
    sql`select id::text, tenant_id, prev_hash, hash, action from audit_events where tenant_id = ${tenantId} order by audit_events.id`,
  );

/** A tenant (its own chain: `tenant.created`) and `n` more events in it. */
async function tenantWith(n: number) {
  const tenant = await createTenant({ database: t.database, clock: systemClock }, systemCtx("tenancy"), {
    code: `c${crypto.randomUUID().slice(0, 8)}`,
    name: "Chain",
  });
  for (let i = 0; i < n; i++)
    await db().transaction((tx) =>
      recordAudit(tx, systemCtx("test", tenant.id), {
        action: "user.created",
        target: { type: "user", id: `u${i}` },
      }),
    );
  return tenant.id;
}

function verifyCli(args: string[]) {
  const proc = Bun.spawnSync(["bun", "src/audit-verify.ts", ...args], {
    cwd: root,
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: process.env.HOME ?? "/tmp", DATABASE_URL: t.url },
    stdout: "pipe",
    stderr: "pipe",
  });
  return { code: proc.exitCode, out: proc.stdout.toString(), err: proc.stderr.toString() };
}

describe("the chain", () => {
  test("each row links to the one before it and its hash covers its content", async () => {
    const tenantId = await tenantWith(3);
    const rows = await rowsOf(tenantId);
    expect(rows.map((r) => r.action)).toEqual([
      "tenant.created",
      "user.created",
      "user.created",
      "user.created",
    ]);
    expect(rows[0]?.prev_hash).toBe(GENESIS_HASH);
    for (let i = 1; i < rows.length; i++) expect(rows[i]?.prev_hash).toBe(rows[i - 1]?.hash as string);
    const [full] = await db().query.auditEvents.findMany({
      where: (e, { eq }) => eq(e.id, Number(rows[1]?.id)),
    });
    if (!full) throw new Error("row");
    expect(auditRowHash(full)).toBe(full.hash);
    expect(auditRowHash({ ...full, targetId: "someone else" })).not.toBe(full.hash);
    const [head] = await execute<{ head_hash: string }>(
      db(),
      sql`select head_hash from audit_chains where chain = ${tenantId}`,
    );
    expect(head?.head_hash).toBe(rows.at(-1)?.hash as string);
  });

  test("40 concurrent writers of one tenant never fork its chain; other tenants' chains are apart", async () => {
    const tenantId = await tenantWith(0);
    const other = await tenantWith(0);
    await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        db().transaction((tx) =>
          recordAudit(tx, systemCtx("test", i % 4 === 0 ? other : tenantId), {
            action: "user.disabled",
            target: { type: "user", id: `${i}` },
          }),
        ),
      ),
    );
    const rows = await rowsOf(tenantId);
    expect(rows).toHaveLength(31);
    // one successor per hash: no two rows share a predecessor
    expect(new Set(rows.map((r) => r.prev_hash)).size).toBe(rows.length);
    for (let i = 1; i < rows.length; i++) expect(rows[i]?.prev_hash).toBe(rows[i - 1]?.hash as string);
    const reports = await verifyAuditChains({ database: t.database }, systemCtx("test"), { tenantId });
    expect(reports).toEqual([{ chain: tenantId, rows: 31, broken: null }]);
    expect(
      (await verifyAuditChains({ database: t.database }, systemCtx("test"), { tenantId: other }))[0]?.rows,
    ).toBe(11);
  });

  test("verifying while writers append: one snapshot, never a false break", async () => {
    const tenantId = await tenantWith(0);
    let done = false;
    const writers = Promise.all(
      Array.from({ length: 4 }, async (_, w) => {
        for (let i = 0; i < 30; i++)
          await db().transaction((tx) =>
            recordAudit(tx, systemCtx("test", tenantId), {
              action: "user.created",
              target: { type: "user", id: `${w}-${i}` },
            }),
          );
      }),
    ).then(() => {
      done = true;
    });
    const seen: number[] = [];
    while (!done) {
      const [report] = await verifyAuditChains({ database: t.database }, systemCtx("test"), { tenantId });
      expect(report?.broken).toBeNull();
      seen.push(report?.rows ?? 0);
    }
    await writers;
    expect(seen.length).toBeGreaterThan(1);
    expect((await verifyAuditChains({ database: t.database }, systemCtx("test"), { tenantId }))[0]).toEqual({
      chain: tenantId,
      rows: 121,
      broken: null,
    });
  });

  test("an upper-case tenant id (from a path) and text jsonb would refuse still make a verifiable row", async () => {
    const tenantId = await tenantWith(0);
    await db().transaction((tx) =>
      recordAudit(tx, systemCtx("test", tenantId.toUpperCase()), {
        action: "feature.override",
        details: { reason: "lone \ud800 surrogate and a \u0000 NUL" },
      }),
    );
    const rows = await rowsOf(tenantId);
    expect(rows.map((r) => r.action)).toEqual(["tenant.created", "feature.override"]);
    expect(
      (await verifyAuditChains({ database: t.database }, systemCtx("test"), { tenantId }))[0]?.broken,
    ).toBeNull();
  });

  test("a rolled-back change leaves no row and the head where it was", async () => {
    const tenantId = await tenantWith(1);
    const before = await rowsOf(tenantId);
    const failed = await db()
      .transaction(async (tx) => {
        // the change and its record, then a failure: both go
        await createTenant(
          { database: t.database, clock: systemClock },
          { ...systemCtx("test"), tx },
          { code: `r${crypto.randomUUID().slice(0, 8)}`, name: "Rolled back" },
        );
        await recordAudit(tx, systemCtx("test", tenantId), { action: "user.deleted" });
        throw new Error("rolled back");
      })
      .catch((error: Error) => error.message);
    expect(failed).toBe("rolled back");
    expect(await rowsOf(tenantId)).toEqual(before);
    const [rolled] = await execute<{ n: number }>(
      db(),
      sql`select count(*)::int as n from audit_events e where e.action = 'tenant.created' and not exists (select 1 from tenants where id = e.tenant_id)`,
    );
    expect(rolled?.n).toBe(0);
    expect(
      (await verifyAuditChains({ database: t.database }, systemCtx("test"), { tenantId }))[0]?.broken,
    ).toBeNull();
  });
});

describe("audit:verify", () => {
  test("an intact log exits 0; --help; bad usage 64", async () => {
    const tenantId = await tenantWith(2);
    const run = verifyCli(["--tenant", tenantId]);
    expect(run.err).toBe("");
    expect(run.code).toBe(0);
    expect(run.out).toContain(`audit chain ${tenantId}: ok, 3 rows`);
    expect(verifyCli(["--help"]).code).toBe(0);
    expect(verifyCli(["--tenant", "nope"]).code).toBe(64);
    expect(verifyCli(["--what"]).code).toBe(64);
  });

  test("an edited row is named as changed (exit 2)", async () => {
    const tenantId = await tenantWith(4);
    const rows = await rowsOf(tenantId);
    const victim = rows[2]?.id as string;
    await execute(
      db(),
      sql`update audit_events set details = '{"role":"owner"}' where id = ${victim}::bigint`,
    );
    const run = verifyCli(["--tenant", tenantId]);
    expect(run.code).toBe(2);
    expect(run.err).toContain(`BROKEN (changed): row ${victim} was changed`);
    // the other chains are not affected, and the run over all of them names this one
    const all = verifyCli([]);
    expect(all.code).toBe(2);
    expect(all.err.trim().split("\n")).toHaveLength(1);
  });

  test("a row inserted between two others is named as inserted", async () => {
    const tenantId = await tenantWith(1);
    // a rolled-back event leaves a free id in the sequence: room for a forged row in the middle
    await db()
      .transaction(async (tx) => {
        await recordAudit(tx, systemCtx("test", tenantId), { action: "user.deleted" });
        throw new Error("rolled back");
      })
      .catch(() => undefined);
    await db().transaction((tx) => recordAudit(tx, systemCtx("test", tenantId), { action: "user.disabled" }));
    const rows = await rowsOf(tenantId);
    const [a, b] = [rows[1] as EventRow, rows[2] as EventRow];
    const forged = Number(a.id) + 1;
    expect(forged).toBeLessThan(Number(b.id));
    await execute(
      db(),
      sql`insert into audit_events (id, tenant_id, occurred_at, actor_type, actor_id, action, outcome, details, prev_hash, hash)
          values (${forged}, ${tenantId}, now(), 'user', 'mallory', 'user.role_changed', 'success', '{}', ${a.hash}, ${"f".repeat(64)})`,
    );
    const run = verifyCli(["--tenant", tenantId]);
    expect(run.code).toBe(2);
    expect(run.err).toContain(`BROKEN (inserted): row ${forged} was inserted`);
  });

  test("a row inserted between two others with a correct hash is named as inserted, not as a gap after it", async () => {
    const tenantId = await tenantWith(1);
    await db()
      .transaction(async (tx) => {
        await recordAudit(tx, systemCtx("test", tenantId), { action: "user.deleted" });
        throw new Error("rolled back");
      })
      .catch(() => undefined);
    await db().transaction((tx) => recordAudit(tx, systemCtx("test", tenantId), { action: "user.disabled" }));
    const [a, b] = await db().query.auditEvents.findMany({
      where: (e, { eq }) => eq(e.tenantId, tenantId),
      orderBy: (e, { asc }) => [asc(e.id)],
      offset: 1,
    });
    if (!a || !b) throw new Error("rows");
    const forged = { ...a, id: a.id + 1, action: "user.role_changed", prevHash: a.hash };
    expect(forged.id).toBeLessThan(b.id);
    await execute(
      db(),
      sql`insert into audit_events (id, tenant_id, occurred_at, actor_type, actor_id, action, target_type, target_id, outcome, details, prev_hash, hash)
          values (${forged.id}, ${tenantId}, ${forged.occurredAt.toISOString()}::timestamptz, ${forged.actorType}, ${forged.actorId},
            ${forged.action}, ${forged.targetType}, ${forged.targetId}, ${forged.outcome}, ${JSON.stringify(forged.details)}::jsonb,
            ${forged.prevHash}, ${auditRowHash(forged)})`,
    );
    const run = verifyCli(["--tenant", tenantId]);
    expect(run.code).toBe(2);
    expect(run.err).toContain(
      `BROKEN (inserted): row ${forged.id} was inserted: row ${b.id} links to the row before it`,
    );
  });

  test("a row appended after the head with a correct hash is named as inserted", async () => {
    const tenantId = await tenantWith(2);
    const [full] = await db().query.auditEvents.findMany({
      where: (e, { eq }) => eq(e.tenantId, tenantId),
      orderBy: (e, { desc }) => [desc(e.id)],
      limit: 1,
    });
    if (!full) throw new Error("row");
    const [next] = await execute<{ id: string }>(
      db(),
      sql`select nextval('audit_events_id_seq')::text as id`,
    );
    const forged = { ...full, id: Number(next?.id), action: "tenant.suspended", prevHash: full.hash };
    await execute(
      db(),
      sql`insert into audit_events (id, tenant_id, occurred_at, actor_type, actor_id, action, target_type, target_id, outcome, details, prev_hash, hash)
          values (${forged.id}, ${tenantId}, ${forged.occurredAt.toISOString()}::timestamptz, ${forged.actorType}, ${forged.actorId},
            ${forged.action}, ${forged.targetType}, ${forged.targetId}, ${forged.outcome}, ${JSON.stringify(forged.details)}::jsonb,
            ${forged.prevHash}, ${auditRowHash(forged)})`,
    );
    const run = verifyCli(["--tenant", tenantId]);
    expect(run.code).toBe(2);
    expect(run.err).toContain(`BROKEN (inserted): row ${forged.id} was inserted after the chain's head`);
  });

  test("a removed row is named by the row after the gap; a removed last row too", async () => {
    const tenantId = await tenantWith(4);
    const rows = await rowsOf(tenantId);
    await execute(db(), sql`delete from audit_events where id = ${rows[2]?.id as string}::bigint`);
    const run = verifyCli(["--tenant", tenantId]);
    expect(run.code).toBe(2);
    expect(run.err).toContain(
      `BROKEN (removed): row(s) removed before row ${rows[3]?.id} (the chain breaks after row ${rows[1]?.id})`,
    );

    const tail = await tenantWith(3);
    const tailRows = await rowsOf(tail);
    await execute(db(), sql`delete from audit_events where id = ${tailRows.at(-1)?.id as string}::bigint`);
    const tailRun = verifyCli(["--tenant", tail]);
    expect(tailRun.code).toBe(2);
    expect(tailRun.err).toContain(
      `BROKEN (removed): row(s) removed at the end: the head is row ${tailRows.at(-1)?.id}`,
    );
  });
});

describe("retention", () => {
  test("prunes whole old prefixes of each chain, records where each starts, and verify still passes", async () => {
    const now = Date.parse("2027-06-01T00:00:00Z");
    const clock = new ManualClock(now);
    const deps = await testDeps(testConfig({ settings: { "Audit:RetentionDays": "30" } }), {
      database: t.database,
      clock,
    });
    const tenant = await createTenant({ database: t.database, clock: systemClock }, systemCtx("tenancy"), {
      code: `p${crypto.randomUUID().slice(0, 8)}`,
      name: "Prune",
    });
    const day = 86_400_000;
    // ages in days, in chain order: the 40-day row written after a 20-day one (a clock step back)
    // is still pruned with everything before it; nothing after the last old row goes
    const ages = [100, 50, 20, 40, 10, 1];
    const ids: number[] = [];
    for (const age of ages)
      ids.push(
        (
          await db().transaction((tx) =>
            recordAudit(tx, systemCtx("test", tenant.id), {
              action: "feature.override",
              at: new Date(now - age * day),
            }),
          )
        ).id,
      );
    // the first pass as the seeded daily schedule runs it: the `audit.prune` job
    const job = bindJob(deps, auditPruneWorker);
    expect(job.kind).toBe(AUDIT_PRUNE_SCHEDULE.kind);
    const before = await execute<{ n: number }>(db(), sql`select count(*)::int as n from audit_events`);
    await job.handler(
      {},
      {
        id: 1,
        kind: job.kind,
        attempt: 1,
        maxAttempts: 1,
        signal: new AbortController().signal,
        progress: async () => {},
        parentResults: async () => ({}),
      },
    );
    const after = await execute<{ n: number }>(db(), sql`select count(*)::int as n from audit_events`);
    const removed = (before[0]?.n ?? 0) - (after[0]?.n ?? 0);
    const left = await rowsOf(tenant.id);
    // tenant.created (written now by the database clock, in 2026) and the first four rows went
    expect(left.map((r) => Number(r.id))).toEqual(ids.slice(4));
    expect(removed).toBeGreaterThanOrEqual(5);
    const [chain] = await execute<{
      start_hash: string;
      pruned_through_id: string;
      pruned_at: Date | string;
    }>(
      db(),
      sql`select start_hash, pruned_through_id::text, pruned_at from audit_chains where chain = ${tenant.id}`,
    );
    expect(chain?.pruned_through_id).toBe(String(ids[3]));
    expect(chain?.start_hash).toBe(left[0]?.prev_hash as string);
    const report = await verifyAuditChains({ database: t.database }, systemCtx("test"), {
      tenantId: tenant.id,
    });
    expect(report[0]?.broken).toBeNull();
    expect(verifyCli(["--tenant", tenant.id]).code).toBe(0);
    // a second pass finds nothing more; a month later the rest goes and the chain still verifies
    expect(await pruneAuditEvents(deps, systemCtx("test"))).toBe(0);
    clock.advance(60 * day);
    await pruneAuditEvents(deps, systemCtx("test"));
    expect(await rowsOf(tenant.id)).toEqual([]);
    expect(
      (await verifyAuditChains({ database: t.database }, systemCtx("test"), { tenantId: tenant.id }))[0]
        ?.broken,
    ).toBeNull();
    // and the next event links to where the pruned chain ended
    await db().transaction((tx) =>
      recordAudit(tx, systemCtx("test", tenant.id), { action: "tenant.suspended" }),
    );
    expect(
      (await verifyAuditChains({ database: t.database }, systemCtx("test"), { tenantId: tenant.id }))[0],
    ).toMatchObject({
      rows: 1,
      broken: null,
    });
    await deps.cache?.close();
  });

  test("the API process seeds the daily audit.prune schedule", async () => {
    const deps = await testDeps(testConfig(), { database: t.database });
    await seedSchedules(deps, systemCtx("test"), { schedules: [AUDIT_PRUNE_SCHEDULE] });
    const [row] = await execute<{ cron: string; kind: string; enabled: boolean }>(
      db(),
      sql`select cron, kind, enabled from job_schedules where name = 'audit.prune'`,
    );
    expect(row).toEqual({ cron: "17 3 * * *", kind: "audit.prune", enabled: true });
  });
});
