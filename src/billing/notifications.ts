import { z } from "zod";
import type { Deps } from "../deps.ts";
import { jobKind, jobWorker } from "../jobs/registry.ts";

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

/** The job kind a subscription change enqueues (src/billing/write-transition.ts). */
export const subscriptionChanged = jobKind(SUBSCRIPTION_CHANGED, subscriptionChangedPayload);

/**
 * Its handler: for now it logs the change (a notification provider would e-mail the tenant's
 * owners here). Registered by every process that runs the job loop (`billingJobs`).
 */
export const subscriptionChangedWorker = jobWorker(
  subscriptionChanged,
  (deps: Pick<Deps, "logger">, payload) => {
    deps.logger.info("subscription changed", payload);
  },
);

/** Billing's job workers, for `JobRegistry.add`. */
export const billingJobs = [subscriptionChangedWorker];
