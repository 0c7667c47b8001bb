import { afterAll, beforeAll, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { ManualClock } from "../../src/clock.ts";
import { systemCtx } from "../../src/context.ts";
import { execute } from "../../src/db/client.ts";
import type { Deps } from "../../src/deps.ts";
import { emailDedupKey, enqueueEmail } from "../../src/email/enqueue-email.ts";
import { emailJobs, sendEmailMessage } from "../../src/email/send-email.ts";
import { createJobLoop } from "../../src/jobs/job-loop.ts";
import { createJobRegistry } from "../../src/jobs/registry.ts";
import { startApi } from "../helpers/api-process.ts";
import { relaxedLimits, settingsEnv, testConfig, testDeps, useTestDatabase } from "../helpers/app.ts";
import { createTenant } from "../helpers/identity.ts";
import { jobRow, waitFor } from "../helpers/jobs.ts";
import { startSmtpServer, type TestSmtpServer } from "../helpers/smtp-server.ts";

/**
 * Exactly once across a crash: an API process whose job loop is in the middle of the SMTP dialogue
 * (the test server holds its RCPT TO) is SIGKILLed; the message stays pending, and the job's
 * takeover after the lease (a job loop in this process, on a clock it moves) sends it once.
 */

let smtp: TestSmtpServer;
beforeAll(async () => {
  smtp = await startSmtpServer({ requireTls: true });
});
afterAll(async () => {
  await smtp.close();
});
const t = useTestDatabase({ poolSize: 4 });
let deps: Deps;
const logs: string[] = [];
beforeAll(async () => {
  deps = await testDeps(testConfig({ settings: smtp.settings() }), { database: t.database, logs });
});

const messageRow = async (id: string) =>
  (
    await execute<{ status: string; attempts: number }>(
      t.database.db,
      sql`select status, attempts from email_messages where id = ${id}`,
    )
  )[0];

test("a message survives an API process SIGKILLed mid-send and arrives exactly once", async () => {
  const api = startApi({
    DATABASE_URL: t.url,
    Logging__Level: "info",
    ...settingsEnv({ ...relaxedLimits, ...smtp.settings() }),
  });
  await api.listening(30_000);
  const hold = smtp.holdRecipients();
  const tenant = await createTenant(t.database.db);
  const { id } = await enqueueEmail(deps, systemCtx("e2e", tenant.id), {
    tenantId: tenant.id,
    to: "once@example.com",
    template: "password-reset",
    data: {
      name: "Once",
      link: "https://app.plinth.test/auth/reset-password?token=e2e-token-abc",
      expiresInMinutes: 30,
    },
  });
  // the API process's job loop claimed it and is inside the SMTP dialogue: kill it there
  await hold.held;
  api.proc.kill("SIGKILL");
  await api.proc.exited;
  hold.release();
  expect(smtp.received).toHaveLength(0);
  expect(await messageRow(id)).toEqual({ status: "pending", attempts: 1 });
  const [job] = await execute<{ id: string }>(
    t.database.db,
    sql`select id from background_jobs where dedup_key = ${emailDedupKey(id)}`,
  );
  const left = await jobRow(t.database, Number(job?.id));
  expect(left.status).toBe("processing");
  const lockedUntil = (left.locked_until as Date).getTime();

  // PostgreSQL (or PgBouncer in front of it) rolls the dead process's transaction back once it sees
  // the socket close; until then the row is still locked, and a takeover that came now would find
  // it busy and back off on a clock nothing moves. Wait for the lock to go, as a real lease would.
  await waitFor(
    async () =>
      (
        await execute<{ id: string }>(
          t.database.db,
          sql`select id from email_messages where id = ${id} for update skip locked`,
        )
      ).length === 1,
    { what: "the dead process's row lock to be released" },
  );
  // the takeover: a job loop here whose clock is past the dead process's lease
  const clock = new ManualClock(new Date(lockedUntil + 1));
  const survivor = createJobLoop(
    { database: t.database, clock, logger: deps.logger, redactor: deps.redactor },
    {
      registry: createJobRegistry().add(deps, emailJobs),
      parallelism: 2,
      batchSize: 5,
      pollMs: 60_000,
      listen: false,
    },
  );
  await survivor.start();
  survivor.wake();
  await smtp.waitFor(1, 15_000);
  await waitFor(async () => (await messageRow(id))?.status === "sent", { what: "the sent mark" });
  await survivor.stop(1_000);
  expect(await messageRow(id)).toEqual({ status: "sent", attempts: 2 });
  // a late run of the same message (a second takeover) sends nothing
  expect(await sendEmailMessage(deps, { messageId: id })).toBe("skipped");
  expect(smtp.received).toHaveLength(1);
  expect(smtp.received[0]?.mail.messageId).toBe(`<${id}@plinth.test>`);
  expect(smtp.received[0]?.mail.text).toContain("token=e2e-token-abc");
  // the dead process logged no link; nor did this one
  for (const line of [...api.lines, ...logs]) expect(line).not.toContain("e2e-token-abc");
}, 90_000);
