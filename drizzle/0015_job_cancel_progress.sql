ALTER TABLE "background_jobs" DROP CONSTRAINT "background_jobs_status_check";--> statement-breakpoint
DROP INDEX "background_jobs_admin_idx";--> statement-breakpoint
ALTER TABLE "background_jobs" ADD COLUMN "progress" jsonb;--> statement-breakpoint
CREATE INDEX "background_jobs_group_idx" ON "background_jobs" USING btree ("group_key","id") WHERE "background_jobs"."group_key" is not null;--> statement-breakpoint
CREATE INDEX "background_jobs_admin_idx" ON "background_jobs" USING btree ("status","kind","id") WHERE "background_jobs"."status" in ('succeeded', 'dead', 'cancelled');--> statement-breakpoint
ALTER TABLE "background_jobs" ADD CONSTRAINT "background_jobs_status_check" CHECK ("background_jobs"."status" in ('pending', 'processing', 'succeeded', 'failed', 'dead', 'cancelled'));