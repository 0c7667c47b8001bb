-- Down step of 0018_job_flows: drops flows, results and debounce. Jobs still waiting for parents
-- cannot be expressed without them: they are cancelled first (the old status check has no
-- `waiting`). Results, flow ids and edges are lost.
DROP TRIGGER "background_jobs_resolve_dependents" ON "background_jobs";--> statement-breakpoint
DROP FUNCTION "background_jobs_resolve_dependents"();--> statement-breakpoint
UPDATE "background_jobs" SET "status" = 'cancelled', "finished_at" = coalesce("finished_at", "updated_at")
  WHERE "status" = 'waiting';--> statement-breakpoint
ALTER TABLE "background_jobs" DROP CONSTRAINT "background_jobs_status_check";--> statement-breakpoint
ALTER TABLE "background_jobs" DROP CONSTRAINT "background_jobs_on_parent_failure_check";--> statement-breakpoint
DROP INDEX "background_jobs_debounce_key_idx";--> statement-breakpoint
DROP INDEX "background_jobs_flow_idx";--> statement-breakpoint
DROP TABLE "job_dependencies";--> statement-breakpoint
ALTER TABLE "background_jobs" DROP COLUMN "flow_id";--> statement-breakpoint
ALTER TABLE "background_jobs" DROP COLUMN "flow_key";--> statement-breakpoint
ALTER TABLE "background_jobs" DROP COLUMN "waiting_on";--> statement-breakpoint
ALTER TABLE "background_jobs" DROP COLUMN "on_parent_failure";--> statement-breakpoint
ALTER TABLE "background_jobs" DROP COLUMN "has_dependents";--> statement-breakpoint
ALTER TABLE "background_jobs" DROP COLUMN "result";--> statement-breakpoint
ALTER TABLE "background_jobs" DROP COLUMN "debounce_key";--> statement-breakpoint
ALTER TABLE "background_jobs" ADD CONSTRAINT "background_jobs_status_check" CHECK ("background_jobs"."status" in ('pending', 'processing', 'succeeded', 'failed', 'dead', 'cancelled'));
