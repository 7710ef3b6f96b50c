-- Runs, steps, tool calls, messages and the outbox.
-- Timestamps are Unix milliseconds (INTEGER); JSON payloads are TEXT.
-- Per-run children are WITHOUT ROWID tables clustered on (run_id, position),
-- so reading one run's trace is a single range scan.

CREATE TABLE runs (
    id                TEXT PRIMARY KEY NOT NULL,
    name              TEXT NOT NULL,
    status            TEXT NOT NULL,
    model             TEXT NOT NULL,
    model_settings    TEXT NOT NULL,
    system_prompt     TEXT,
    initial_prompt    TEXT NOT NULL,
    input             TEXT,
    tools             TEXT NOT NULL,
    tags              TEXT NOT NULL,
    context           TEXT NOT NULL,
    max_turns         INTEGER NOT NULL,
    agent_id          TEXT,
    result            TEXT,
    summary           TEXT,
    failure_reason    TEXT,
    input_tokens      INTEGER NOT NULL DEFAULT 0,
    output_tokens     INTEGER NOT NULL DEFAULT 0,
    cache_read_tokens INTEGER NOT NULL DEFAULT 0,
    reasoning_tokens  INTEGER NOT NULL DEFAULT 0,
    total_tokens      INTEGER NOT NULL DEFAULT 0,
    requests          INTEGER NOT NULL DEFAULT 0,
    step_count        INTEGER NOT NULL DEFAULT 0,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL,
    started_at        INTEGER,
    finished_at       INTEGER
);
CREATE INDEX runs_by_created ON runs (created_at DESC, id DESC);
CREATE INDEX runs_by_status ON runs (status, created_at DESC, id DESC);
CREATE INDEX runs_by_agent ON runs (agent_id, created_at DESC, id DESC);

CREATE TABLE run_tags (
    key    TEXT NOT NULL,
    value  TEXT NOT NULL,
    run_id TEXT NOT NULL,
    PRIMARY KEY (key, value, run_id)
) WITHOUT ROWID;

CREATE TABLE steps (
    run_id             TEXT NOT NULL,
    idx                INTEGER NOT NULL,
    kind               TEXT NOT NULL,
    status             TEXT NOT NULL,
    request            TEXT NOT NULL,
    response           TEXT NOT NULL,
    input_tokens       INTEGER NOT NULL,
    output_tokens      INTEGER NOT NULL,
    cache_read_tokens  INTEGER NOT NULL,
    reasoning_tokens   INTEGER NOT NULL,
    total_tokens       INTEGER NOT NULL,
    requests           INTEGER NOT NULL,
    started_at         INTEGER NOT NULL,
    model_completed_at INTEGER,
    completed_at       INTEGER,
    PRIMARY KEY (run_id, idx)
) WITHOUT ROWID;

CREATE TABLE tool_calls (
    run_id       TEXT NOT NULL,
    step_idx     INTEGER NOT NULL,
    pos          INTEGER NOT NULL,
    id           TEXT NOT NULL,
    tool_name    TEXT NOT NULL,
    arguments    TEXT NOT NULL,
    result       TEXT,
    error        TEXT,
    status       TEXT NOT NULL,
    started_at   INTEGER,
    completed_at INTEGER,
    PRIMARY KEY (run_id, step_idx, pos)
) WITHOUT ROWID;

CREATE TABLE messages (
    run_id     TEXT NOT NULL,
    seq        INTEGER NOT NULL,
    id         TEXT NOT NULL,
    type       TEXT NOT NULL,
    step_idx   INTEGER,
    data       TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;

CREATE TABLE outbox (
    id         TEXT PRIMARY KEY NOT NULL,
    run_id     TEXT NOT NULL,
    recipient  TEXT NOT NULL,
    subject    TEXT NOT NULL,
    body       TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE INDEX outbox_by_created ON outbox (created_at DESC);
