import { createHash } from "node:crypto";

/** The `prev_hash` of a chain's first row: 64 zeros. */
export const GENESIS_HASH = "0".repeat(64);

/** The chain a tenant's events form; `platform` for events of no tenant. */
export const PLATFORM_CHAIN = "platform";
export const chainOf = (tenantId: string | null): string => tenantId ?? PLATFORM_CHAIN;

/** What the hash covers: every column of the row but `hash` itself. */
export interface HashedAuditRow {
  id: number;
  tenantId: string | null;
  occurredAt: Date;
  actorType: string;
  actorId: string | null;
  action: string;
  targetType: string | null;
  targetId: string | null;
  outcome: string;
  clientAddress: string | null;
  userAgent: string | null;
  requestId: string | null;
  details: Record<string, unknown>;
  prevHash: string;
}

/** JSON with object keys sorted at every depth: the same value always encodes to the same text. */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== "object") return JSON.stringify(value ?? null);
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  const entries = Object.entries(value as Record<string, unknown>)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(",")}}`;
}

/**
 * SHA-256 (hex) over the canonical encoding of a row: a JSON array of its columns in a fixed order,
 * the time as ISO 8601 with milliseconds, `details` with sorted keys, and `prev_hash` last.
 */
export function auditRowHash(row: HashedAuditRow): string {
  const encoded = canonicalJson([
    "plinth.audit.v1",
    row.id,
    row.tenantId,
    row.occurredAt.toISOString(),
    row.actorType,
    row.actorId,
    row.action,
    row.targetType,
    row.targetId,
    row.outcome,
    row.clientAddress,
    row.userAgent,
    row.requestId,
    row.details,
    row.prevHash,
  ]);
  return createHash("sha256").update(encoded).digest("hex");
}
