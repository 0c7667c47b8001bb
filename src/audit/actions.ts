import { markdownTable } from "../markdown-table.ts";
import type { ActionRow, ActionRows } from "./action-row.ts";

export type { ActionRow, ActionRows };

/**
 * The audit trail's own actions, those no area records (the migrator's bootstrap, the refusal the
 * access layer writes), each described once: with the actions the areas declare (`defineArea({
 * auditActions })`, src/http/area.ts, each area's rows in `src/http/routes/<area>-actions.ts`) they
 * are what `recordAudit` accepts, the console's filter and the action table of docs/audit.md (`bun
 * run docs:audit`), in that order. An area's action is declared with the area, never here: `bun run
 * areas:check` fails on one here whose prefix an area's actions use.
 */
const ACTIONS = {
  "platform.bootstrapped": {
    what: "The first platform administrator was created.",
    target: "`user`",
    details: "`email`, `role`",
    writtenBy: "`bootstrapPlatformAdmin` (`migrate --bootstrap-platform-admin`; actor: system `bootstrap`)",
  },
  "authorization.refused": {
    what: "A signed-in caller (a user or an API key) was refused: 403 `forbidden`.",
    outcome: "denied",
    target: "—",
    details: "`httpMethod`, `path`, `reason`",
    writtenBy: "`app.onError` for every 403 `forbidden` to a signed-in caller (rate limited)",
  },
} as const satisfies Record<string, ActionRow | readonly ActionRow[]>;

/**
 * The actions of the listed areas, by name: src/http/area-registry.ts fills it in (declaration
 * merging), so that `recordAudit` takes an area's action once src/http/areas.ts lists the area.
 */
// biome-ignore lint/suspicious/noEmptyInterface: filled in by src/http/area-registry.ts
export interface AreaAuditActions {}

export type AuditAction = keyof typeof ACTIONS | keyof AreaAuditActions;

/** The trail's own actions, in the order docs/audit.md lists them (the areas' follow: area-registry.ts). */
export const TRAIL_AUDIT_ACTIONS = Object.keys(ACTIONS) as readonly AuditAction[];

/** The action table of docs/audit.md: the trail's actions, then each area's (a test keeps them equal). */
export function renderAuditActions(areaActions: readonly ActionRows[]): string {
  const rows: string[][] = [];
  for (const actions of [ACTIONS, ...areaActions])
    for (const [action, described] of Object.entries(actions)) {
      for (const row of [described].flat() as readonly ActionRow[]) {
        const name = row.outcome ? `\`${action}\` (${row.outcome})` : `\`${action}\``;
        rows.push([name, row.what, row.target, row.details, row.writtenBy]);
      }
    }
  return `${markdownTable(["action", "what", "target", "details", "written by"], rows).join("\n")}\n`;
}

const TABLE_BEGINS =
  "<!-- The action table is generated from the trail's actions (src/audit/actions.ts) and the areas' auditActions by `bun run docs:audit`; do not edit it by hand. -->";
const TABLE_ENDS = "<!-- End of the generated action table. -->";

/** docs/audit.md with its action table (between the two markers) rendered afresh. */
export function withAuditActionTable(markdown: string, areaActions: readonly ActionRows[]): string {
  const begins = markdown.indexOf(TABLE_BEGINS);
  const ends = markdown.indexOf(TABLE_ENDS);
  if (begins < 0 || ends < begins) throw new Error("docs/audit.md lost the markers of its action table");
  return `${markdown.slice(0, begins + TABLE_BEGINS.length)}\n\n${renderAuditActions(areaActions)}\n${markdown.slice(ends)}`;
}
