ALTER TABLE "background_jobs" ADD COLUMN "group_key" text;--> statement-breakpoint
ALTER TABLE "background_jobs" ADD COLUMN "priority" integer DEFAULT 0 NOT NULL;