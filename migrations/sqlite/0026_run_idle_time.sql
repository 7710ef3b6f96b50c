-- A run's duration is its active time: the wall time a follow-up message
-- finds the run sitting finished is added here (by the follow-up's own
-- update) and left out of the duration. Runs followed up before this
-- column start at 0 (their gaps are not known). The same column as
-- migrations/postgres/0015_run_idle_time.sql.
ALTER TABLE runs ADD COLUMN idle_ms INTEGER NOT NULL DEFAULT 0;
