import { sql } from "drizzle-orm";
import { z } from "zod";
import { systemCtx } from "../context.ts";
import { execute } from "../db/client.ts";
import { withPlatformTransaction } from "../db/operation.ts";
import type { Deps } from "../deps.ts";
import { jobKind, jobWorker } from "../jobs/registry.ts";
import { defineSchedule } from "../jobs/schedules.ts";

const DAY_MS = 86_400_000;
const PRUNE_BATCH = 5_000;

export const EMAIL_PRUNE_KIND = "email.prune";

/**
 * Deletes outbox messages sent or failed more than `Email:RetentionDays` ago (a pending message
 * stays, whatever its age), and e-mail sign-in codes a day past their expiry, in batches, on the
 * platform path (every tenant's rows). Returns how many messages went.
 */
export async function pruneEmailOutbox(deps: Pick<Deps, "database" | "clock" | "config">): Promise<number> {
  const now = deps.clock.now().getTime();
  const cutoff = new Date(now - deps.config.settings.Email.RetentionDays * DAY_MS).toISOString();
  const ctx = systemCtx("email-prune");
  let total = 0;
  for (;;) {
    const rows = await withPlatformTransaction(deps, ctx, (tx) =>
      execute(
        tx,
        sql`delete from email_messages where id in (
              select id from email_messages
              where (status = 'sent' and sent_at < ${cutoff}::timestamptz)
                 or (status = 'failed' and updated_at < ${cutoff}::timestamptz)
              limit ${PRUNE_BATCH})
            returning id`,
      ),
    );
    total += rows.length;
    if (rows.length < PRUNE_BATCH) break;
  }
  await withPlatformTransaction(deps, ctx, (tx) =>
    execute(
      tx,
      sql`delete from email_sign_in_codes where expires_at < ${new Date(now - DAY_MS).toISOString()}::timestamptz`,
    ),
  );
  return total;
}

/** The daily pruning job (enqueued by its schedule) and its handler. */
export const emailPruneWorker = jobWorker(
  jobKind(EMAIL_PRUNE_KIND, z.object({}).passthrough()),
  async (deps: Pick<Deps, "database" | "clock" | "config" | "logger">) => {
    const pruned = await pruneEmailOutbox(deps);
    if (pruned > 0) deps.logger.info("e-mail outbox pruned", { messages: pruned });
  },
);

/** Seeded by the schedules loop: daily at 03:27 UTC. */
export const emailPruneSchedule = defineSchedule(EMAIL_PRUNE_KIND, {
  cron: "27 3 * * *",
  kind: EMAIL_PRUNE_KIND,
});
