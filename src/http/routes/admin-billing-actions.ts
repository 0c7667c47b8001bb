import type { ActionRow } from "../../audit/action-row.ts";

/** The audit actions of the area `billingArea` declares (admin-billing.ts): docs/audit.md's rows for them. */
export const BILLING_ACTIONS = {
  "subscription.event": {
    what: "A tenant's subscription changed.",
    target: "`subscription` (tenant id)",
    details: "`event`, `from`, `to`, `plan`, `reason` (the source: `admin`, `webhook`, `loop`)",
    writtenBy: "`applySubscriptionEvent`, the subscriptions loop (only when it changed something)",
  },
  "feature.override": {
    what: "A tenant's feature override was set or removed.",
    target: "`feature` (key)",
    details: "`feature`, `value` (enabled), `count` (limit), `reason`; or `status: removed`",
    writtenBy: "`updateFeatureOverride`, `deleteFeatureOverride`",
  },
} as const satisfies Record<string, ActionRow | readonly ActionRow[]>;
