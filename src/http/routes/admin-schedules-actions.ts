import type { ActionRow } from "../../audit/action-row.ts";

/** The audit actions of the area `schedulesArea` declares (admin-schedules.ts): docs/audit.md's rows for them. */
export const SCHEDULES_ACTIONS = {
  "schedule.updated": {
    what: "A schedule was created, changed, paused or resumed.",
    target: "`schedule` (name)",
    details: "`kind`, `status` (`enabled` / `disabled`), `value` (the cron)",
    writtenBy: "`putSchedule` (PUT /api/admin/schedules/{name}, the console's Pause / Resume)",
  },
  "schedule.deleted": {
    what: "A schedule was deleted.",
    target: "`schedule` (name)",
    details: "—",
    writtenBy: "`deleteSchedule`",
  },
  "schedule.run": {
    what: "A schedule's job was enqueued now, out of its cadence.",
    target: "`schedule` (name)",
    details: "`kind`, `value` (the job id)",
    writtenBy: "`runScheduleNow` (POST …/run, the console's Run now)",
  },
} as const satisfies Record<string, ActionRow | readonly ActionRow[]>;
