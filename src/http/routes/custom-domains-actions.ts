import type { ActionRow } from "../../audit/action-row.ts";

/** The audit actions of the area `customDomainsArea` declares (custom-domains.ts): docs/audit.md's rows for them. */
export const CUSTOM_DOMAINS_ACTIONS = {
  "domain.added": {
    what: "A custom domain was claimed.",
    target: "`domain`",
    details: "`hostname`",
    writtenBy: "`createCustomDomain`",
  },
  "domain.activated": {
    what: "A custom domain's records were verified: it is Active.",
    target: "`domain`",
    details: "`hostname`",
    writtenBy: "the tenant-domains loop (actor: system `tenant-domains`)",
  },
  "domain.removed": {
    what: "A custom domain was removed.",
    target: "`domain`",
    details: "`hostname`; `reason: claim expired` when the loop removes an expired claim",
    writtenBy: "`deleteCustomDomain`; `expireDomainClaims` (actor: system `tenant-domains`)",
  },
  "domain.check_requested": {
    what: "A custom domain's check was asked for now, whatever its backoff.",
    target: "`domain`",
    details: "`hostname`",
    writtenBy: "`checkCustomDomain` (tenant and admin API, the console's Check now)",
  },
} as const satisfies Record<string, ActionRow | readonly ActionRow[]>;
