-- Down step of 0023_job_fan_in: successes resolve their edges in the row trigger again (one update
-- of the child per parent). Run it together with the release before 0023, whose completer does not
-- resolve edges itself.
DROP TRIGGER "background_jobs_resolve_dependents" ON "background_jobs";--> statement-breakpoint
CREATE TRIGGER "background_jobs_resolve_dependents" AFTER UPDATE OF "status" ON "background_jobs"
  FOR EACH ROW WHEN (NEW."has_dependents" AND OLD."status" IS DISTINCT FROM NEW."status"
                     AND NEW."status" IN ('succeeded', 'dead', 'cancelled'))
  EXECUTE FUNCTION "background_jobs_resolve_dependents"();
