-- Issue 21: a replay run (`POST /api/runs/{id}/replay`) records the run it
-- replays, how (recorded or live), and where it diverged, as JSON.

ALTER TABLE runs ADD COLUMN replay TEXT;
