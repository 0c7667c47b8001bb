CREATE TABLE "job_dependencies" (
	"parent_id" bigint NOT NULL,
	"child_id" bigint NOT NULL,
	"resolved" boolean DEFAULT false NOT NULL,
	CONSTRAINT "job_dependencies_parent_id_child_id_pk" PRIMARY KEY("parent_id","child_id")
);
--> statement-breakpoint
ALTER TABLE "background_jobs" DROP CONSTRAINT "background_jobs_status_check";--> statement-breakpoint
ALTER TABLE "background_jobs" ADD COLUMN "flow_id" uuid;--> statement-breakpoint
ALTER TABLE "background_jobs" ADD COLUMN "flow_key" text;--> statement-breakpoint
ALTER TABLE "background_jobs" ADD COLUMN "waiting_on" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "background_jobs" ADD COLUMN "on_parent_failure" text;--> statement-breakpoint
ALTER TABLE "background_jobs" ADD COLUMN "has_dependents" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "background_jobs" ADD COLUMN "result" jsonb;--> statement-breakpoint
ALTER TABLE "background_jobs" ADD COLUMN "debounce_key" text;--> statement-breakpoint
ALTER TABLE "job_dependencies" ADD CONSTRAINT "job_dependencies_parent_id_background_jobs_id_fk" FOREIGN KEY ("parent_id") REFERENCES "public"."background_jobs"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "job_dependencies" ADD CONSTRAINT "job_dependencies_child_id_background_jobs_id_fk" FOREIGN KEY ("child_id") REFERENCES "public"."background_jobs"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "job_dependencies_child_idx" ON "job_dependencies" USING btree ("child_id");--> statement-breakpoint
CREATE INDEX "background_jobs_flow_idx" ON "background_jobs" USING btree ("flow_id","id") WHERE "background_jobs"."flow_id" is not null;--> statement-breakpoint
CREATE UNIQUE INDEX "background_jobs_debounce_key_idx" ON "background_jobs" USING btree ("debounce_key") WHERE "background_jobs"."debounce_key" is not null and "background_jobs"."status" = 'pending';--> statement-breakpoint
ALTER TABLE "background_jobs" ADD CONSTRAINT "background_jobs_on_parent_failure_check" CHECK ("background_jobs"."on_parent_failure" is null or "background_jobs"."on_parent_failure" in ('cancel', 'run', 'wait'));--> statement-breakpoint
ALTER TABLE "background_jobs" ADD CONSTRAINT "background_jobs_status_check" CHECK ("background_jobs"."status" in ('pending', 'processing', 'succeeded', 'failed', 'dead', 'cancelled', 'waiting'));--> statement-breakpoint
-- Hand-written: a job that other jobs depend on and that ends (succeeded, dead or cancelled, by any
-- path: the completer, a takeover on the last attempt, an admin or flow cancel) resolves its edges
-- here, so neither the claim nor the completer reads job_dependencies. A success counts for every
-- child; a dead or cancelled parent applies each child's `on_parent_failure`: `run` counts as a
-- success, `cancel` (null) cancels the waiting child (its own dependents follow through this
-- trigger), `wait` leaves it waiting with a note for an administrator. Times come from the parent's
-- `updated_at`, which the writer set from its injected clock.
CREATE FUNCTION "background_jobs_resolve_dependents"() RETURNS trigger LANGUAGE plpgsql AS $$
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
                     AND NEW."status" IN ('succeeded', 'dead', 'cancelled'))
  EXECUTE FUNCTION "background_jobs_resolve_dependents"();
