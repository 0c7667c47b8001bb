-- Hand-written (drizzle-kit generates DROP INDEX + CREATE INDEX, which scans the whole table under a
-- lock that blocks enqueues): turning deduplication off needs no rebuild. New entries are stored one
-- by one from now on; posting lists already there go as their jobs are claimed.
ALTER INDEX "background_jobs_fair_idx" SET (deduplicate_items = off);
