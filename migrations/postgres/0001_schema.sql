-- The PostgreSQL store's schema: the same tables and columns as the SQLite
-- store (migrations/sqlite/, read as one), so one row codec serves both.
-- Times are Unix milliseconds (BIGINT), JSON payloads are JSONB (read back
-- as text with `::text`), flags are BOOLEAN, binary data BYTEA. A webhook's
-- payload stays TEXT: it is signed byte for byte.

CREATE TABLE runs (
    id                     TEXT PRIMARY KEY,
    name                   TEXT NOT NULL,
    status                 TEXT NOT NULL,
    model                  TEXT NOT NULL,
    model_settings         JSONB NOT NULL,
    system_prompt          TEXT,
    initial_prompt         TEXT NOT NULL,
    input                  JSONB,
    tools                  JSONB NOT NULL,
    tags                   JSONB NOT NULL,
    context                JSONB NOT NULL,
    max_turns              BIGINT NOT NULL,
    agent_id               TEXT,
    result                 JSONB,
    summary                TEXT,
    failure_reason         TEXT,
    input_tokens           BIGINT NOT NULL DEFAULT 0,
    output_tokens          BIGINT NOT NULL DEFAULT 0,
    cache_read_tokens      BIGINT NOT NULL DEFAULT 0,
    reasoning_tokens       BIGINT NOT NULL DEFAULT 0,
    total_tokens           BIGINT NOT NULL DEFAULT 0,
    requests               BIGINT NOT NULL DEFAULT 0,
    step_count             BIGINT NOT NULL DEFAULT 0,
    created_at             BIGINT NOT NULL,
    updated_at             BIGINT NOT NULL,
    started_at             BIGINT,
    finished_at            BIGINT,
    approval               JSONB NOT NULL DEFAULT '{}',
    always_approve         JSONB NOT NULL DEFAULT '[]',
    always_reject          JSONB NOT NULL DEFAULT '[]',
    interactive            BOOLEAN NOT NULL DEFAULT TRUE,
    result_schema          JSONB,
    call_summarization     BOOLEAN NOT NULL DEFAULT FALSE,
    parent_run_id          TEXT,
    forked_from_message_id TEXT,
    finish_unannounced     BOOLEAN NOT NULL DEFAULT FALSE,
    project                TEXT NOT NULL DEFAULT 'default',
    created_by_id          TEXT,
    created_by             TEXT,
    agent_version          BIGINT,
    agent_overrides        JSONB NOT NULL DEFAULT '[]',
    current_agent          TEXT,
    current_agent_version  BIGINT,
    sub_agents             JSONB NOT NULL DEFAULT '[]',
    handoffs               JSONB NOT NULL DEFAULT '[]',
    handoff_turns          BIGINT NOT NULL DEFAULT 0,
    parent_call_id         TEXT,
    root_run_id            TEXT,
    depth                  BIGINT NOT NULL DEFAULT 0,
    child_count            BIGINT NOT NULL DEFAULT 0,
    metadata               JSONB,
    reasoning_traces       BOOLEAN NOT NULL DEFAULT FALSE,
    on_status_change       JSONB
);
CREATE INDEX runs_by_created ON runs (created_at DESC, id DESC);
CREATE INDEX runs_by_status ON runs (status, created_at DESC, id DESC);
CREATE INDEX runs_by_agent ON runs (agent_id, created_at DESC, id DESC);
CREATE INDEX runs_by_parent ON runs (parent_run_id) WHERE parent_run_id IS NOT NULL;
CREATE INDEX runs_finish_unannounced ON runs (id) WHERE finish_unannounced;
CREATE INDEX runs_by_project ON runs (project, created_at DESC, id DESC);
CREATE INDEX runs_by_project_status ON runs (project, status, created_at DESC, id DESC);
CREATE INDEX runs_by_project_agent ON runs (project, agent_id, created_at DESC, id DESC);
CREATE INDEX runs_children ON runs (parent_run_id, created_at, id) WHERE parent_call_id IS NOT NULL;
CREATE INDEX runs_roots_by_project ON runs (project, created_at DESC, id DESC) WHERE parent_call_id IS NULL;
CREATE INDEX runs_by_agent_version ON runs (agent_id, agent_version);

CREATE TABLE run_tags (
    key        TEXT NOT NULL,
    value      TEXT NOT NULL,
    run_id     TEXT NOT NULL,
    created_at BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (key, value, run_id)
);
CREATE INDEX run_tags_by_created ON run_tags (key, value, created_at DESC, run_id DESC);

CREATE TABLE steps (
    run_id             TEXT NOT NULL,
    idx                BIGINT NOT NULL,
    kind               TEXT NOT NULL,
    status             TEXT NOT NULL,
    request            JSONB NOT NULL,
    response           JSONB NOT NULL,
    input_tokens       BIGINT NOT NULL,
    output_tokens      BIGINT NOT NULL,
    cache_read_tokens  BIGINT NOT NULL,
    reasoning_tokens   BIGINT NOT NULL,
    total_tokens       BIGINT NOT NULL,
    requests           BIGINT NOT NULL,
    started_at         BIGINT NOT NULL,
    model_completed_at BIGINT,
    completed_at       BIGINT,
    model              TEXT,
    PRIMARY KEY (run_id, idx)
);

CREATE TABLE tool_calls (
    run_id       TEXT NOT NULL,
    step_idx     BIGINT NOT NULL,
    pos          BIGINT NOT NULL,
    id           TEXT NOT NULL,
    tool_name    TEXT NOT NULL,
    arguments    JSONB NOT NULL,
    result       JSONB,
    error        TEXT,
    status       TEXT NOT NULL,
    started_at   BIGINT,
    completed_at BIGINT,
    reasoning    TEXT,
    requested_at BIGINT,
    approval     JSONB,
    child_run_id TEXT,
    PRIMARY KEY (run_id, step_idx, pos)
);
CREATE INDEX tool_calls_awaiting ON tool_calls (requested_at) WHERE status = 'awaiting_approval';
CREATE INDEX tool_calls_by_id ON tool_calls (run_id, id);

CREATE TABLE messages (
    run_id     TEXT NOT NULL,
    seq        BIGINT NOT NULL,
    id         TEXT NOT NULL,
    type       TEXT NOT NULL,
    step_idx   BIGINT,
    data       JSONB NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (run_id, seq)
);
CREATE INDEX messages_by_type ON messages (run_id, type);

CREATE TABLE outbox (
    id         TEXT PRIMARY KEY,
    run_id     TEXT NOT NULL,
    recipient  TEXT NOT NULL,
    subject    TEXT NOT NULL,
    body       TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX outbox_by_created ON outbox (created_at DESC);

CREATE TABLE approval_decisions (
    run_id             TEXT NOT NULL,
    call_id            TEXT NOT NULL,
    step_idx           BIGINT NOT NULL,
    tool_name          TEXT NOT NULL,
    decision           TEXT NOT NULL,
    decided_by         TEXT NOT NULL,
    decided_at         BIGINT NOT NULL,
    always             BOOLEAN NOT NULL,
    original_arguments JSONB NOT NULL,
    edited_arguments   JSONB,
    comment            TEXT,
    decided_by_id      TEXT,
    PRIMARY KEY (run_id, call_id)
);
CREATE INDEX approval_decisions_by_time ON approval_decisions (decided_at DESC, run_id DESC, call_id DESC);

CREATE TABLE blobs (
    id           TEXT PRIMARY KEY,
    run_id       TEXT NOT NULL,
    call_id      TEXT,
    content_type TEXT NOT NULL,
    size         BIGINT NOT NULL,
    data         BYTEA NOT NULL,
    created_at   BIGINT NOT NULL
);
CREATE INDEX blobs_by_run ON blobs (run_id);

CREATE TABLE run_events (
    run_id TEXT NOT NULL,
    seq    BIGINT NOT NULL,
    type   TEXT NOT NULL,
    data   JSONB NOT NULL,
    at     BIGINT NOT NULL,
    PRIMARY KEY (run_id, seq)
);

CREATE TABLE projects (
    name       TEXT PRIMARY KEY,
    created_at BIGINT NOT NULL
);

-- Every database starts with the default project.
INSERT INTO projects (name, created_at) VALUES ('default', 0);

CREATE TABLE project_prices (
    project     TEXT NOT NULL,
    model       TEXT NOT NULL,
    input       DOUBLE PRECISION NOT NULL,
    output      DOUBLE PRECISION NOT NULL,
    cache_read  DOUBLE PRECISION NOT NULL,
    cache_write DOUBLE PRECISION NOT NULL,
    reasoning   DOUBLE PRECISION NOT NULL,
    updated_at  BIGINT NOT NULL,
    PRIMARY KEY (project, model)
);
-- The built-in model is free.
INSERT INTO project_prices (project, model, input, output, cache_read, cache_write, reasoning, updated_at)
VALUES ('default', 'builtin', 0, 0, 0, 0, 0, 0);

CREATE TABLE users (
    id             TEXT PRIMARY KEY,
    name           TEXT NOT NULL UNIQUE,
    password_hash  TEXT NOT NULL,
    instance_admin BOOLEAN NOT NULL,
    created_at     BIGINT NOT NULL
);

CREATE TABLE memberships (
    project TEXT NOT NULL,
    user_id TEXT NOT NULL,
    role    TEXT NOT NULL,
    PRIMARY KEY (project, user_id)
);
CREATE INDEX memberships_by_user ON memberships (user_id);

CREATE TABLE api_keys (
    id           TEXT PRIMARY KEY,
    name         TEXT NOT NULL,
    hash         TEXT NOT NULL UNIQUE,
    prefix       TEXT NOT NULL,
    project      TEXT,
    role         TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    created_by   TEXT,
    last_used_at BIGINT,
    revoked_at   BIGINT
);
CREATE INDEX api_keys_by_project ON api_keys (project, created_at DESC);

CREATE TABLE sessions (
    id         TEXT PRIMARY KEY,
    data       JSONB NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX sessions_by_expiry ON sessions (expires_at);

CREATE TABLE setup_tokens (
    hash       TEXT PRIMARY KEY,
    expires_at BIGINT NOT NULL
);

CREATE TABLE audit_log (
    seq        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    project    TEXT,
    at         BIGINT NOT NULL,
    actor_id   TEXT NOT NULL,
    actor_name TEXT NOT NULL,
    action     TEXT NOT NULL,
    target     TEXT,
    detail     TEXT
);
CREATE INDEX audit_by_project ON audit_log (project, seq DESC);

CREATE TABLE agents (
    id         TEXT PRIMARY KEY,
    project    TEXT NOT NULL,
    name       TEXT NOT NULL,
    version    BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE UNIQUE INDEX agents_by_name ON agents (project, name);

CREATE TABLE agent_versions (
    agent_id      TEXT NOT NULL,
    version       BIGINT NOT NULL,
    spec          JSONB NOT NULL,
    created_at    BIGINT NOT NULL,
    created_by_id TEXT,
    created_by    TEXT,
    PRIMARY KEY (agent_id, version)
);

CREATE TABLE http_tools (
    project           TEXT NOT NULL,
    name              TEXT NOT NULL,
    spec              JSONB NOT NULL,
    headers           JSONB NOT NULL DEFAULT '{}',
    secret            TEXT NOT NULL,
    created_at        BIGINT NOT NULL,
    updated_at        BIGINT NOT NULL,
    updated_by_id     TEXT,
    updated_by        TEXT,
    secret_created_at BIGINT NOT NULL,
    PRIMARY KEY (project, name)
);

CREATE TABLE webhook_secrets (
    project         TEXT PRIMARY KEY,
    secret          TEXT NOT NULL,
    previous_secret TEXT,
    previous_until  BIGINT,
    created_at      BIGINT NOT NULL,
    rotated_at      BIGINT
);

CREATE TABLE webhook_subscriptions (
    id              TEXT PRIMARY KEY,
    project         TEXT NOT NULL,
    url             TEXT NOT NULL,
    statuses        JSONB,
    description     TEXT,
    secret          TEXT NOT NULL,
    previous_secret TEXT,
    previous_until  BIGINT,
    created_at      BIGINT NOT NULL,
    created_by_id   TEXT,
    created_by      TEXT,
    rotated_at      BIGINT
);
CREATE INDEX webhook_subscriptions_by_project ON webhook_subscriptions (project, created_at DESC, id DESC);

-- Every status change of a run with a hook (or in a project with a
-- subscription) is captured in the transaction that makes it.
CREATE TABLE status_changes (
    seq            BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id         TEXT NOT NULL,
    project        TEXT NOT NULL,
    old_status     TEXT NOT NULL,
    new_status     TEXT NOT NULL,
    at             BIGINT NOT NULL,
    result         JSONB,
    result_omitted BOOLEAN NOT NULL DEFAULT FALSE,
    summary        TEXT,
    failure_reason TEXT,
    interruptions  JSONB
);
CREATE INDEX status_changes_by_run ON status_changes (run_id, seq);

CREATE FUNCTION runs_status_changes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.on_status_change IS NULL
       AND NOT EXISTS (SELECT 1 FROM webhook_subscriptions WHERE project = NEW.project) THEN
        RETURN NULL;
    END IF;
    INSERT INTO status_changes (run_id, project, old_status, new_status, at, result, result_omitted, summary,
        failure_reason, interruptions)
    VALUES (
        NEW.id, NEW.project, OLD.status, NEW.status,
        (extract(epoch FROM clock_timestamp()) * 1000)::bigint,
        CASE WHEN length(NEW.result::text) <= 65536 THEN NEW.result END,
        coalesce(length(NEW.result::text) > 65536, FALSE),
        substr(NEW.summary, 1, 16384),
        substr(NEW.failure_reason, 1, 16384),
        CASE WHEN NEW.status = 'paused' THEN (
            SELECT coalesce(jsonb_agg(jsonb_build_object(
                'call_id', c.id, 'tool_name', c.tool_name, 'step_index', c.step_idx,
                'arguments', CASE WHEN length(c.arguments::text) <= 65536 THEN c.arguments END,
                'requested_at', c.requested_at) ORDER BY c.step_idx, c.pos), '[]'::jsonb)
            FROM (SELECT * FROM tool_calls WHERE run_id = NEW.id AND status = 'awaiting_approval'
                  ORDER BY step_idx, pos LIMIT 100) c)
        END);
    RETURN NULL;
END;
$$;

CREATE TRIGGER runs_status_changes AFTER UPDATE OF status ON runs
FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status)
EXECUTE FUNCTION runs_status_changes();

CREATE TABLE webhook_deliveries (
    id              TEXT PRIMARY KEY,
    run_id          TEXT NOT NULL,
    project         TEXT NOT NULL,
    subscription_id TEXT,
    target          TEXT NOT NULL,
    change_seq      BIGINT NOT NULL,
    url             TEXT NOT NULL,
    old_status      TEXT NOT NULL,
    new_status      TEXT NOT NULL,
    changed_at      BIGINT NOT NULL,
    payload         TEXT NOT NULL,
    state           TEXT NOT NULL,
    attempts        BIGINT NOT NULL DEFAULT 0,
    next_attempt_at BIGINT,
    claim           TEXT,
    claimed_until   BIGINT NOT NULL DEFAULT 0,
    created_at      BIGINT NOT NULL,
    finished_at     BIGINT,
    failure         TEXT
);
CREATE INDEX webhook_deliveries_by_run ON webhook_deliveries (run_id, change_seq DESC, id);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_in_order ON webhook_deliveries (run_id, target, change_seq) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_pending_by_project ON webhook_deliveries (project) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_by_subscription ON webhook_deliveries (subscription_id) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_finished ON webhook_deliveries (finished_at) WHERE state <> 'pending';

CREATE TABLE webhook_attempts (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    delivery_id TEXT NOT NULL,
    at          BIGINT NOT NULL,
    status_code BIGINT,
    latency_ms  BIGINT NOT NULL,
    error       TEXT
);
CREATE INDEX webhook_attempts_by_delivery ON webhook_attempts (delivery_id, id DESC);
