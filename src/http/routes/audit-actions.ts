import type { ActionRow } from "../../audit/action-row.ts";

/** The audit actions of the area `auditArea` declares (audit.ts): docs/audit.md's rows for them. */
export const AUDIT_ACTIONS = {
  "audit.exported": {
    what: "An audit log was exported (NDJSON); written when the export starts, in the chain exported.",
    target: "`audit_chain` (a tenant id, `platform`; none for every chain)",
    details:
      "`filter` (the filters: `action=…`, `actor=…`, `from=…`, …), `count` (rows in the export's range)",
    writtenBy: "`exportAuditEvents` (tenant owners and admins, platform administrators)",
  },
  "audit.rows_suppressed": {
    what: "Rows of refusals or failed sign-ins over the failure limiter's limit are being dropped (from this row on, for up to a minute). Outcome: the dropped rows'.",
    target: "—",
    details:
      "`action` (whose rows are dropped), `limit` (`address`: `Audit:FailuresPerMinute`, `tenant`: `Audit:FailuresPerTenantPerMinute`), `perMinute`",
    writtenBy: "`recordAuditLimited`: the first dropped row of a minute, per address or tenant, and action",
  },
} as const satisfies Record<string, ActionRow | readonly ActionRow[]>;
