-- Issue 5: the persisted event stream, and indexes for huge traces and run lists.

-- Every event of a run, numbered from 1 with no gaps (the SSE `id:`), so a
-- client can replay everything after the last id it saw. `type` is the wire
-- name (`run.status`, `message.delta`, ...), `data` the JSON payload without
-- it, `at` Unix milliseconds. Clustered on (run_id, seq): a replay is one
-- range scan, an append lands at the end of the run's range.
CREATE TABLE run_events (
    run_id TEXT NOT NULL,
    seq    INTEGER NOT NULL,
    type   TEXT NOT NULL,
    data   TEXT NOT NULL,
    at     INTEGER NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;

-- The tag filter of the runs list, newest first with keyset pagination:
-- run_tags carries the run's created_at so the index yields a page directly
-- instead of sorting every run with the tag.
ALTER TABLE run_tags ADD COLUMN created_at INTEGER NOT NULL DEFAULT 0;
UPDATE run_tags SET created_at = COALESCE((SELECT created_at FROM runs WHERE runs.id = run_tags.run_id), 0);
CREATE INDEX run_tags_by_created ON run_tags (key, value, created_at DESC, run_id DESC);

-- One tool call by id (the full payload behind a light-mode preview).
CREATE INDEX tool_calls_by_id ON tool_calls (run_id, id);
