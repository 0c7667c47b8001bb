import { type ActionRows, type AuditAction, TRAIL_AUDIT_ACTIONS } from "../audit/actions.ts";
import type { Area } from "./area.ts";
import { AREAS } from "./areas.ts";
import type { ConsolePage } from "./console/console-page.ts";

/** The name of every audit action a listed area declares. */
type ActionNamesOf<A> = A extends Area<infer Actions> ? keyof Actions & string : never;
type AreaActionName = ActionNamesOf<(typeof AREAS)[number]>;

declare module "../audit/actions.ts" {
  /** Filled in here: `recordAudit` takes an area's actions once src/http/areas.ts lists the area. */
  interface AreaAuditActions extends Record<AreaActionName, true> {}
}

/** Each listed area's audit actions, in the list's order (docs/audit.md's rows after the trail's). */
export const AREA_AUDIT_ACTIONS: readonly ActionRows[] = AREAS.map((area) => area.auditActions);

/** Every action the log records, in the order docs/audit.md lists them: the console's filter. */
export const AUDIT_ACTIONS: readonly AuditAction[] = [
  ...TRAIL_AUDIT_ACTIONS,
  ...AREA_AUDIT_ACTIONS.flatMap((actions) => Object.keys(actions) as AuditAction[]),
];

/** The console pages the areas declare, after the console's own (src/http/console/routes.ts). */
export const AREA_CONSOLE_PAGES: readonly ConsolePage[] = AREAS.flatMap((area) => area.consolePages);
