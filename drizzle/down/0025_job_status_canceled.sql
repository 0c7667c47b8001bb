-- Down step of 0025_job_status_canceled: `canceled` jobs are `cancelled` again, with the check,
-- the admin index and the flow trigger as 0018 and 0023 made them.
DROP TRIGGER "background_jobs_resolve_dependents" ON "background_jobs";--> statement-breakpoint
ALTER TABLE "background_jobs" DROP CONSTRAINT "background_jobs_status_check";--> statement-breakpoint
DROP INDEX "background_jobs_admin_idx";--> statement-breakpoint
UPDATE "background_jobs" SET "status" = 'cancelled' WHERE "status" = 'canceled';--> statement-breakpoint
CREATE INDEX "background_jobs_admin_idx" ON "background_jobs" USING btree ("status","kind","id") WHERE "background_jobs"."status" in ('succeeded', 'dead', 'cancelled');--> statement-breakpoint
ALTER TABLE "background_jobs" ADD CONSTRAINT "background_jobs_status_check" CHECK ("background_jobs"."status" in ('pending', 'processing', 'succeeded', 'failed', 'dead', 'cancelled', 'waiting'));--> statement-breakpoint
CREATE OR REPLACE FUNCTION "background_jobs_resolve_dependents"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  WITH "resolved" AS (
    UPDATE "job_dependencies" d SET "resolved" = true
    FROM "background_jobs" c
    WHERE d."parent_id" = NEW."id" AND NOT d."resolved" AND c."id" = d."child_id"
      AND (NEW."status" = 'succeeded' OR c."on_parent_failure" = 'run')
    RETURNING d."child_id"
  )
  UPDATE "background_jobs" c
  SET "waiting_on" = c."waiting_on" - 1,
      "status" = CASE WHEN c."status" = 'waiting' AND c."waiting_on" <= 1 THEN 'pending' ELSE c."status" END,
      "last_error" = CASE WHEN c."status" = 'waiting' THEN NULL ELSE c."last_error" END,
      "updated_at" = NEW."updated_at"
  FROM "resolved" r
  WHERE c."id" = r."child_id";
  IF NEW."status" <> 'succeeded' THEN
    UPDATE "background_jobs" c
    SET "status" = 'cancelled', "finished_at" = NEW."updated_at", "updated_at" = NEW."updated_at",
        "last_error" = format('parent job %s ended %s', NEW."id", NEW."status")
    FROM "job_dependencies" d
    WHERE d."parent_id" = NEW."id" AND NOT d."resolved" AND c."id" = d."child_id"
      AND c."status" = 'waiting' AND coalesce(c."on_parent_failure", 'cancel') = 'cancel';
    UPDATE "background_jobs" c
    SET "last_error" = format('parent job %s ended %s: waiting for an administrator (retry the parent, or cancel this job)', NEW."id", NEW."status"),
        "updated_at" = NEW."updated_at"
    FROM "job_dependencies" d
    WHERE d."parent_id" = NEW."id" AND NOT d."resolved" AND c."id" = d."child_id"
      AND c."status" = 'waiting' AND c."on_parent_failure" = 'wait';
  END IF;
  RETURN NULL;
END;
$$;--> statement-breakpoint
CREATE TRIGGER "background_jobs_resolve_dependents" AFTER UPDATE OF "status" ON "background_jobs"
  FOR EACH ROW WHEN (NEW."has_dependents" AND OLD."status" IS DISTINCT FROM NEW."status"
                     AND NEW."status" IN ('dead', 'cancelled'))
  EXECUTE FUNCTION "background_jobs_resolve_dependents"();
