-- Hand-written: a parent that succeeds no longer resolves its edges in this row trigger. The
-- statement that records successes does it (src/jobs/outcomes.ts `recordingCtes`), counting each
-- child down once per statement by the number of its parents that statement finished, with the
-- children locked in id order: a fan-in of 10,000 parents updates its child once per completion
-- batch instead of once per parent, and two workers finishing parents of shared children never
-- lock them in opposite orders. Dead and cancelled parents (rare, and from several paths: the
-- completer, a takeover on the last attempt, an admin or flow cancel) still go through the trigger.
DROP TRIGGER "background_jobs_resolve_dependents" ON "background_jobs";--> statement-breakpoint
CREATE TRIGGER "background_jobs_resolve_dependents" AFTER UPDATE OF "status" ON "background_jobs"
  FOR EACH ROW WHEN (NEW."has_dependents" AND OLD."status" IS DISTINCT FROM NEW."status"
                     AND NEW."status" IN ('dead', 'cancelled'))
  EXECUTE FUNCTION "background_jobs_resolve_dependents"();
