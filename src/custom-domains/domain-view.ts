import { isoOrNull } from "../clock.ts";
import type { tenantDomains } from "../db/schema/index.ts";
import type { Deps } from "../deps.ts";
import { verificationRecordName } from "./hostname-policy.ts";
import { cnameTargets } from "./settings.ts";

export type DomainRow = typeof tenantDomains.$inferSelect;

/** A domain as admins and tenant owners see it: what to set in DNS, and where it stands. */
export interface DomainView {
  id: string;
  tenantId: string;
  hostname: string;
  status: "Pending" | "Failed" | "Active";
  verification: { type: "TXT"; name: string; value: string };
  /** Point the hostname's CNAME at one of these. */
  cnameTargets: string[];
  /** The CNAME target seen at the last check. */
  cnameTarget: string | null;
  /** The gateway's view: DNS success alone does not mean a certificate is issued. */
  tls: { gatewayHostnameId: string | null; hostnameStatus: string | null; certificateStatus: string | null };
  lastFailure: { code: string; reason: string } | null;
  lastCheckedAt: string | null;
  nextCheckAt: string | null;
  checkAttempts: number;
  activatedAt: string | null;
  /** When a Pending or Failed claim is removed; null while Active. */
  expiresAt: string | null;
  deactivatedAt: string | null;
  createdAt: string;
}

/** A domain across tenants, for platform staff: the domain view and its tenant's code. */
export interface PlatformDomainView extends DomainView {
  tenantCode: string;
}

export function domainView(deps: Pick<Deps, "config">, row: DomainRow): DomainView {
  const s = deps.config.settings.TenantDomains;
  const due = row.status !== "Active" || row.tlsStatus !== "active";
  return {
    id: row.id,
    tenantId: row.tenantId,
    hostname: row.hostname,
    status: row.status,
    verification: {
      type: "TXT",
      name: verificationRecordName(s.VerificationRecordPrefix, row.hostname),
      value: row.verificationToken,
    },
    cnameTargets: cnameTargets(s),
    cnameTarget: row.cnameTarget,
    tls: {
      gatewayHostnameId: row.gatewayHostnameId,
      hostnameStatus: row.gatewayStatus,
      certificateStatus: row.tlsStatus,
    },
    lastFailure:
      row.lastFailureCode && row.status !== "Active"
        ? { code: row.lastFailureCode, reason: row.lastFailureReason ?? row.lastFailureCode }
        : null,
    lastCheckedAt: isoOrNull(row.lastCheckedAt),
    nextCheckAt: due ? isoOrNull(row.nextCheckAt) : null,
    checkAttempts: row.checkAttempts,
    activatedAt: isoOrNull(row.activatedAt),
    expiresAt: row.status === "Active" ? null : isoOrNull(row.expiresAt),
    deactivatedAt: isoOrNull(row.deactivatedAt),
    createdAt: row.createdAt.toISOString(),
  };
}
