-- Conversation control: follow-ups (interactive), forks (parent links),
-- structured results (result_schema), call summarization, and blobs for
-- tool results too large to keep inline.

ALTER TABLE runs ADD COLUMN interactive INTEGER NOT NULL DEFAULT 1;
ALTER TABLE runs ADD COLUMN result_schema TEXT;
ALTER TABLE runs ADD COLUMN call_summarization INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN parent_run_id TEXT;
ALTER TABLE runs ADD COLUMN forked_from_message_id TEXT;
CREATE INDEX runs_by_parent ON runs (parent_run_id) WHERE parent_run_id IS NOT NULL;

CREATE TABLE blobs (
    id           TEXT PRIMARY KEY NOT NULL,
    run_id       TEXT NOT NULL,
    call_id      TEXT,
    content_type TEXT NOT NULL,
    size         INTEGER NOT NULL,
    data         BLOB NOT NULL,
    created_at   INTEGER NOT NULL
);
CREATE INDEX blobs_by_run ON blobs (run_id);
