-- Issue 21: a fork made from a step (`POST /api/runs/{id}/fork`) records the
-- index of its parent's step it continues after; the same column as
-- migrations/sqlite/0018_forks_from_steps.sql.

ALTER TABLE runs ADD COLUMN forked_from_step BIGINT;
