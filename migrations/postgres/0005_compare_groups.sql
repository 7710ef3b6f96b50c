-- Issue 18: comparison groups, one run configuration started on several
-- models at once (`POST /api/runs/batch`). The same column and index as
-- migrations/sqlite/0016_compare_groups.sql: each run of a batch records the
-- group's id (a run started alone, a fork and an imported run have none),
-- and a group is read whole in the order it was created.

ALTER TABLE runs ADD COLUMN group_id TEXT;

CREATE INDEX runs_by_group ON runs (group_id, created_at, id) WHERE group_id IS NOT NULL;
