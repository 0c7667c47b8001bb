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

// Functions, not constants: an area's console pages import this module while src/http/areas.ts,
// which imports the areas, is still being evaluated; the list is read once it is complete.

/** Each listed area's audit actions, in the list's order (docs/audit.md's rows after the trail's). */
export const areaAuditActions = (): readonly ActionRows[] => AREAS.map((area) => area.auditActions);

/** Every action the log records, in the order docs/audit.md lists them: the console's filter. */
export const auditActionNames = (): readonly AuditAction[] => [
  ...TRAIL_AUDIT_ACTIONS,
  ...areaAuditActions().flatMap((actions) => Object.keys(actions) as AuditAction[]),
];

/**
 * The console's pages, each declared by its area (`defineArea({ consolePages })`), in the list's
 * order, the platform's pages ahead of those a tenant's owners and admins see too (their own account,
 * their tenant's settings): the navigation's order.
 */
export const areaConsolePages = (): readonly ConsolePage[] =>
  AREAS.flatMap((area) => area.consolePages).sort(
    (a, b) => Number(seenByTenants(a)) - Number(seenByTenants(b)),
  );

const seenByTenants = (page: ConsolePage) =>
  page.seenBy.includes("tenant_owner") || page.seenBy.includes("tenant_admin");
