CREATE TABLE "job_rate_limits" (
	"rate_key" text PRIMARY KEY NOT NULL,
	"tat" timestamp with time zone DEFAULT '-infinity' NOT NULL,
	"next_at" timestamp with time zone DEFAULT '-infinity' NOT NULL
);
--> statement-breakpoint
ALTER TABLE "background_jobs" ADD COLUMN "rate_key" text;--> statement-breakpoint
CREATE INDEX "background_jobs_rate_idx" ON "background_jobs" USING btree ("rate_key","run_after") WHERE "background_jobs"."rate_key" is not null and "background_jobs"."status" in ('pending', 'failed');--> statement-breakpoint
CREATE INDEX "background_jobs_rate_due_idx" ON "background_jobs" USING btree ("run_after") WHERE "background_jobs"."rate_key" is not null and "background_jobs"."status" in ('pending', 'failed');