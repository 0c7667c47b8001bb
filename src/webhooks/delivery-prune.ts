import { sql } from "drizzle-orm";
import { z } from "zod";
import { systemCtx } from "../context.ts";
import { execute } from "../db/client.ts";
import { withPlatformDatabase } from "../db/operation.ts";
import type { Deps } from "../deps.ts";
import { jobKind, jobWorker } from "../jobs/registry.ts";
import { defineSchedule } from "../jobs/schedules.ts";
import { deliverWorker } from "./deliver.ts";

const DAY_MS = 86_400_000;

export const PRUNE_KIND = "webhooks.prune";
const PRUNE_BATCH = 5_000;
/** Retention crosses tenants: the platform path. */
const PRUNE = systemCtx("webhooks.prune");

/**
 * Deletes events older than `Webhooks:LogRetentionDays` with nothing left to deliver, and their
 * deliveries and attempts with them (foreign keys cascade), in batches.
 */
export async function pruneDeliveryLog(deps: Pick<Deps, "database" | "clock" | "config">): Promise<number> {
  const cutoff = new Date(
    deps.clock.now().getTime() - deps.config.settings.Webhooks.LogRetentionDays * DAY_MS,
  );
  let total = 0;
  for (;;) {
    const rows = await withPlatformDatabase(deps, PRUNE, (db) =>
      execute(
        db,
        sql`delete from webhook_events where id in (
            select ev.id from webhook_events ev
            where ev.occurred_at < ${cutoff.toISOString()}::timestamptz
              and not exists (select 1 from webhook_deliveries d where d.event_id = ev.id and d.status = 'pending')
            limit ${PRUNE_BATCH})
          returning id`,
      ),
    );
    total += rows.length;
    if (rows.length < PRUNE_BATCH) return total;
  }
}

/** The daily pruning job (enqueued by its schedule, by kind name) and its handler. */
export const pruneWorker = jobWorker(
  jobKind(PRUNE_KIND, z.object({}).passthrough()),
  async (deps: Pick<Deps, "database" | "clock" | "config" | "logger">) => {
    const pruned = await pruneDeliveryLog(deps);
    if (pruned > 0) deps.logger.info("webhook delivery log pruned", { events: pruned });
  },
);
/** Seeded by the schedules loop. */
export const pruneSchedule = defineSchedule("webhooks.prune", { cron: "17 3 * * *", kind: PRUNE_KIND });

/** Webhooks' job workers, for `JobRegistry.add`. */
export const webhookJobs = [deliverWorker, pruneWorker];
