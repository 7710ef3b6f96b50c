-- Issue 18: comparison groups, one run configuration started on several
-- models at once (`POST /api/runs/batch`). Each run of a batch records the
-- group's id; a run started alone, a fork and an imported run have none.
-- A group is read whole, in the order it was created (by `created_at`, then
-- `id`): `runs_by_group` holds just the runs that are in one.

ALTER TABLE runs ADD COLUMN group_id TEXT;

CREATE INDEX runs_by_group ON runs (group_id, created_at, id) WHERE group_id IS NOT NULL;
