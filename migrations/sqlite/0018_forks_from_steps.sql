-- Issue 21: a fork made from a step (`POST /api/runs/{id}/fork`) records the
-- index of its parent's step it continues after (the parent is
-- `parent_run_id`, as for a fork made by editing a message).

ALTER TABLE runs ADD COLUMN forked_from_step INTEGER;
