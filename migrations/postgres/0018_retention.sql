-- Each project's retention (see engine/src/model/retention.rs): finished
-- runs older than `retention_days`, or past the newest
-- `retention_max_runs` root runs, are deleted by a background job in small
-- batches. NULL: no limit. The same columns as
-- migrations/sqlite/0029_retention.sql.
ALTER TABLE projects ADD COLUMN retention_days BIGINT;
ALTER TABLE projects ADD COLUMN retention_max_runs BIGINT;
-- A root run's child runs, deleted with it.
CREATE INDEX runs_by_root ON runs (root_run_id) WHERE parent_call_id IS NOT NULL;
