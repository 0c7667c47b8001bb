import type { ActionRow } from "../../audit/action-row.ts";

/** The audit actions of the area `tenantLifecycleArea` declares (tenant-lifecycle.ts): docs/audit.md's rows for them. */
export const TENANT_LIFECYCLE_ACTIONS = {
  "tenant.export_requested": {
    what: "A tenant export was asked for (every row and object of the tenant into one archive).",
    target: "`tenant_export`",
    details: "`tenantId`, `secrets` (true: provider secrets sealed to a passphrase)",
    writtenBy: "`startTenantExport` (POST /api/admin/tenants/{tenantId}/exports, POST /api/tenant/exports)",
  },
  "tenant.deletion_scheduled": {
    what: "A tenant's deletion was scheduled after a grace period.",
    target: "`tenant`",
    details: "`graceDays`, `scheduledFor`",
    writtenBy: "`scheduleTenantDeletion` (POST /api/admin/tenants/{tenantId}/deletion)",
  },
  "tenant.deletion_canceled": {
    what: "A tenant's scheduled deletion was canceled.",
    target: "`tenant`",
    details: "`scheduledFor`",
    writtenBy: "`cancelTenantDeletion` (DELETE /api/admin/tenants/{tenantId}/deletion)",
  },
  "tenant.deleted": {
    what: "A tenant was deleted: its deletion certificate (platform chain).",
    target: "`tenant`",
    details:
      "`code`, `counts` (rows per table, objects per prefix), `requestedBy`, `scheduledFor`, `dataKeyDestroyed` (its data key destroyed first: crypto-shredded), `masterSealedValues` (values then still sealed directly under a master key)",
    writtenBy: "the `tenant.delete` job (`deleteTenantData`)",
  },
  "tenant.imported": {
    what: "A tenant was loaded from an export archive (platform chain).",
    target: "`tenant`",
    details: "`code`, `counts` (rows per table, objects)",
    writtenBy: "`bun run tenant:import`",
  },
} as const satisfies Record<string, ActionRow | readonly ActionRow[]>;
