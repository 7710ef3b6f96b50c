-- Issue 21: a replay run records the run it replays, how, and where it
-- diverged (JSON text); the same column as migrations/sqlite/0019_replays.sql.

ALTER TABLE runs ADD COLUMN replay TEXT;
