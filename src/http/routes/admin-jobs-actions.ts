import type { ActionRow } from "../../audit/action-row.ts";

/** The audit actions of the area `jobsArea` declares (admin-jobs.ts): docs/audit.md's rows for them. */
export const JOBS_ACTIONS = {
  "job.retried": {
    what: "A dead job, or a selection of jobs, was queued again.",
    target: "`job` (id); none for a bulk retry",
    details: "`count`, `jobKind`; a bulk retry: `reason: bulk retry`, `status`, `kind` (its filter)",
    writtenBy:
      "`retryDeadJob`, `retryJobs` (through `jobAdminActed`, src/jobs/admin/job-admin-acted.ts; platform chain)",
  },
  "job.canceled": {
    what: "A job, or a selection of jobs, was canceled.",
    target: "`job` (id); none for a bulk cancel",
    details: "`count`, `jobKind`; a bulk cancel: `reason: bulk cancel`, `status`, `kind`",
    writtenBy:
      "`cancelJob`, `cancelJobs`, `cancelFlow` (a flow cancel: a bulk cancel whose filter is the flow; through `jobAdminActed`)",
  },
  "job.priority_changed": {
    what: "A job's priority was changed.",
    target: "`job` (id)",
    details: "`count`, `jobKind`, `value` (the new priority)",
    writtenBy: "`setJobPriority` (`PATCH /api/admin/jobs/{id}`, through `jobAdminActed`)",
  },
} as const satisfies Record<string, ActionRow | readonly ActionRow[]>;
