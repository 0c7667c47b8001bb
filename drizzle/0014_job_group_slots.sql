CREATE TABLE "job_group_slots" (
	"kind" text NOT NULL,
	"group_key" text NOT NULL,
	"slot" integer NOT NULL,
	"job_id" bigint NOT NULL,
	CONSTRAINT "job_group_slots_kind_group_key_slot_pk" PRIMARY KEY("kind","group_key","slot")
);
--> statement-breakpoint
ALTER TABLE "background_jobs" ADD COLUMN "group_slot" integer;--> statement-breakpoint
CREATE INDEX "job_group_slots_job_idx" ON "job_group_slots" USING btree ("job_id");--> statement-breakpoint
CREATE INDEX "background_jobs_fair_idx" ON "background_jobs" USING btree ("priority",coalesce("group_key", ''),"run_after") WHERE "background_jobs"."status" in ('pending', 'failed');--> statement-breakpoint
-- Hand-written: a job that leaves `processing` (any path: completion, failure, release, cancel,
-- delete) gives its group slot back. Jobs without a slot (group_slot null) never fire it.
CREATE FUNCTION "background_jobs_free_group_slot"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM "job_group_slots" WHERE "job_id" = OLD."id";
  RETURN NULL;
END;
$$;--> statement-breakpoint
CREATE TRIGGER "background_jobs_free_group_slot_on_update" AFTER UPDATE OF "status" ON "background_jobs"
  FOR EACH ROW WHEN (OLD."status" = 'processing' AND NEW."status" <> 'processing' AND OLD."group_slot" IS NOT NULL)
  EXECUTE FUNCTION "background_jobs_free_group_slot"();--> statement-breakpoint
CREATE TRIGGER "background_jobs_free_group_slot_on_delete" AFTER DELETE ON "background_jobs"
  FOR EACH ROW WHEN (OLD."group_slot" IS NOT NULL)
  EXECUTE FUNCTION "background_jobs_free_group_slot"();
