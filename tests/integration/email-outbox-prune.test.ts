import { expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { ManualClock } from "../../src/clock.ts";
import { systemCtx } from "../../src/context.ts";
import { execute } from "../../src/db/client.ts";
import { emailSignInCodes } from "../../src/db/schema/index.ts";
import { enqueueEmail } from "../../src/email/enqueue-email.ts";
import { EMAIL_PRUNE_KIND, emailPruneWorker } from "../../src/email/prune-outbox.ts";
import { sendEmailMessage } from "../../src/email/send-email.ts";
import { bindJob } from "../../src/jobs/registry.ts";
import { seedSchedules } from "../../src/jobs/schedules.ts";
import { API_JOB_KINDS, apiSchedules } from "../../src/loops/api-background.ts";
import { useTestApp } from "../helpers/app.ts";
import { createTenant, createUser } from "../helpers/identity.ts";

/**
 * Issue #32: the e-mail outbox keeps a sent (or failed) message `Email:RetentionDays`, then the
 * daily `email.prune` job deletes it; a pending message stays whatever its age. The clock is the
 * injected one: nothing waits.
 */
const clock = new ManualClock("2026-11-01T10:00:00Z");
const h = useTestApp({ clock, settings: { "Email:RetentionDays": "7" } });
const DAY = 86_400_000;

const status = async (id: string) =>
  (await execute<{ status: string }>(h.db, sql`select status from email_messages where id = ${id}`))[0]
    ?.status ?? "pruned";

async function message(tenantId: string) {
  return enqueueEmail(h.deps, systemCtx("test", tenantId), {
    tenantId,
    to: `to-${crypto.randomUUID().slice(0, 8)}@example.com`,
    template: "email-verification",
    data: { name: "Ada", link: "https://app.plinth.test/auth/verify-email?token=x", expiresInMinutes: 30 },
  });
}

test("sent and failed messages go after the retention, pending ones stay; spent sign-in codes go too", async () => {
  const tenant = await createTenant(h.db);
  const user = await createUser(h.db, tenant.id);
  const old = await message(tenant.id);
  const failed = await message(tenant.id);
  const waiting = await message(tenant.id);
  // the development provider (no provider configured) takes the message: sent
  expect(await sendEmailMessage(h.deps, { messageId: old.id })).toBe("sent");
  await execute(h.db, sql`update email_messages set status = 'failed' where id = ${failed.id}`);
  await h.db.insert(emailSignInCodes).values({
    tenantId: tenant.id,
    userId: user.id,
    email: user.email,
    codeHash: "h",
    linkHash: `l-${crypto.randomUUID()}`,
    createdAt: clock.now(),
    expiresAt: new Date(clock.now().getTime() + 600_000),
  });
  clock.advance(3 * DAY);
  const recent = await message(tenant.id);
  expect(await sendEmailMessage(h.deps, { messageId: recent.id })).toBe("sent");

  const job = bindJob(h.deps, emailPruneWorker);
  const run = () =>
    job.handler(
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
  // six days after the first send: nothing is old enough
  clock.advance(3 * DAY);
  await run();
  expect(await Promise.all([old, failed, waiting, recent].map((m) => status(m.id)))).toEqual([
    "sent",
    "failed",
    "pending",
    "sent",
  ]);
  // eight days: the first sent and the failed one go; the pending one and the recent one stay
  clock.advance(2 * DAY);
  await run();
  expect(await Promise.all([old, failed, waiting, recent].map((m) => status(m.id)))).toEqual([
    "pruned",
    "pruned",
    "pending",
    "sent",
  ]);
  const codes = await execute<{ n: number }>(
    h.db,
    sql`select count(*)::int as n from email_sign_in_codes where tenant_id = ${tenant.id}`,
  );
  expect(codes[0]?.n).toBe(0);
  expect(h.logs.some((line) => line.includes("e-mail outbox pruned"))).toBe(true);
});

test("the API process runs the job and seeds its daily schedule", async () => {
  expect(API_JOB_KINDS).toContain(EMAIL_PRUNE_KIND);
  await seedSchedules(h.deps, systemCtx("test"), { schedules: apiSchedules(h.deps) });
  const [row] = await execute<{ cron: string; kind: string }>(
    h.db,
    sql`select cron, kind from job_schedules where name = 'email.prune'`,
  );
  expect(row).toEqual({ cron: "27 3 * * *", kind: EMAIL_PRUNE_KIND });
});
