-- Down step of 0028_sessions_impersonator_index: the index of impersonation sessions by admin
-- (the console banner reads it) goes; nothing else changes.
DROP INDEX "sessions_impersonator_idx";
