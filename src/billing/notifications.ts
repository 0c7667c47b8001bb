import { z } from "zod";
import { defineJob, type JobDefinition } from "../jobs/registry.ts";
import type { Logger } from "../telemetry/logger.ts";

export const SUBSCRIPTION_CHANGED = "billing.subscription_changed";

/** Ids, states and plan codes only: nothing secret or personal goes into a job payload. */
export const subscriptionChangedPayload = z.object({
  tenantId: z.uuid(),
  subscriptionId: z.uuid(),
  historyId: z.number().int().positive(),
  event: z.string(),
  fromStatus: z.string().nullable(),
  toStatus: z.string(),
  fromPlan: z.string().nullable(),
  toPlan: z.string(),
  source: z.enum(["admin", "webhook", "loop"]),
});
export type SubscriptionChangedPayload = z.infer<typeof subscriptionChangedPayload>;

/** What enqueue needs (kind and schema); the handler lives in `subscriptionChangedJob`. */
export const subscriptionChanged = defineJob(SUBSCRIPTION_CHANGED, subscriptionChangedPayload, () => {});

/**
 * The notification handler: for now it logs the change (a notification provider would e-mail the
 * tenant's owners here). Register it in the job registry of every process that runs the job loop.
 */
export function subscriptionChangedJob(logger: Logger): JobDefinition {
  return defineJob(SUBSCRIPTION_CHANGED, subscriptionChangedPayload, (payload) => {
    logger.info("subscription changed", payload);
  });
}

/** Billing's job kinds, for `createJobRegistry`. */
export function billingJobs(logger: Logger): JobDefinition[] {
  return [subscriptionChangedJob(logger)];
}
