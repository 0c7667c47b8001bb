-- Down step of 0020_job_rate_limits: drops per-key rate limits. Jobs keep running, without a rate;
-- the keys and the buckets' state are lost.
DROP INDEX "background_jobs_rate_due_idx";--> statement-breakpoint
DROP INDEX "background_jobs_rate_idx";--> statement-breakpoint
ALTER TABLE "background_jobs" DROP COLUMN "rate_key";--> statement-breakpoint
DROP TABLE "job_rate_limits";
