import type { AuditOutcome } from "./record.ts";

/** One kind of row an action writes: docs/audit.md's action table has a line for each. */
export interface ActionRow {
  /** What happened. */
  what: string;
  /** Set when the action writes rows of this outcome only (`auth.sign_in` has one row per outcome). */
  outcome?: AuditOutcome;
  target: string;
  details: string;
  writtenBy: string;
}

/** Actions, each described once by its rows (the audit trail's own, or an area's: src/http/area.ts). */
export type ActionRows = Readonly<Record<string, ActionRow | readonly ActionRow[]>>;
