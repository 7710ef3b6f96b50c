-- Issue 20: approval requests and questions from agents runlens does not
-- run (`POST /api/approval-requests`, `POST /api/questions`); the same tables as
-- migrations/sqlite/0017_agent_requests.sql.
--
-- One row per request, pending until a person decides it (or its deadline
-- rejects it); `outcome` is the decision as JSON. `idempotency_key` makes a
-- retried create return the row it made (one per project and kind).
-- `request_counts` holds each project's pending requests, kept by the
-- store in the transactions that create and decide them, so the navigation
-- badge reads one row at any backlog. `request_rules` are the "always"
-- decisions: a tool approved (or rejected) for the rest of one agent run.

CREATE TABLE agent_requests (
    id              TEXT PRIMARY KEY,
    project         TEXT NOT NULL,
    kind            TEXT NOT NULL,
    status          TEXT NOT NULL,
    tool            TEXT,
    arguments       TEXT,
    question        TEXT,
    choices         TEXT,
    context         TEXT,
    external_id     TEXT,
    run_name        TEXT NOT NULL,
    trace_id        TEXT,
    run_id          TEXT,
    idempotency_key TEXT,
    fingerprint     TEXT NOT NULL,
    callback_url    TEXT,
    requested_by    TEXT NOT NULL,
    requested_by_id TEXT NOT NULL,
    created_at      BIGINT NOT NULL,
    deadline        BIGINT,
    decided_at      BIGINT,
    outcome         TEXT
);
CREATE UNIQUE INDEX agent_requests_by_key ON agent_requests (project, kind, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX agent_requests_pending ON agent_requests (project, kind, created_at, id) WHERE status = 'pending';
CREATE INDEX agent_requests_decided ON agent_requests (project, kind, decided_at DESC, id DESC)
    WHERE status <> 'pending';
CREATE INDEX agent_requests_due ON agent_requests (deadline) WHERE status = 'pending' AND deadline IS NOT NULL;
CREATE INDEX agent_requests_by_run ON agent_requests (run_id, created_at, id) WHERE run_id IS NOT NULL;

CREATE TABLE request_counts (
    project TEXT PRIMARY KEY,
    n       BIGINT NOT NULL
);

CREATE TABLE request_rules (
    project     TEXT NOT NULL,
    external_id TEXT NOT NULL,
    tool        TEXT NOT NULL,
    outcome     TEXT NOT NULL,
    PRIMARY KEY (project, external_id, tool)
);
