-- Identity and access: projects, users and their roles per project, API
-- keys, server-side sessions, the one-time setup link, and the audit log.
-- Every run (and so its steps, approvals, events and outbox entries) belongs
-- to one project; runs stored before this migration belong to `default`.

CREATE TABLE projects (
    name       TEXT PRIMARY KEY NOT NULL,
    created_at INTEGER NOT NULL
);
INSERT INTO projects (name, created_at) VALUES ('default', 0);

ALTER TABLE runs ADD COLUMN project TEXT NOT NULL DEFAULT 'default';
ALTER TABLE runs ADD COLUMN created_by_id TEXT;
ALTER TABLE runs ADD COLUMN created_by TEXT;
CREATE INDEX runs_by_project ON runs (project, created_at DESC, id DESC);
CREATE INDEX runs_by_project_status ON runs (project, status, created_at DESC, id DESC);
CREATE INDEX runs_by_project_agent ON runs (project, agent_id, created_at DESC, id DESC);

ALTER TABLE approval_decisions ADD COLUMN decided_by_id TEXT;

-- Prices become per project: the old table's rows move to `default`.
CREATE TABLE project_prices (
    project     TEXT NOT NULL,
    model       TEXT NOT NULL,
    input       REAL NOT NULL,
    output      REAL NOT NULL,
    cache_read  REAL NOT NULL,
    cache_write REAL NOT NULL,
    reasoning   REAL NOT NULL,
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (project, model)
) WITHOUT ROWID;
INSERT INTO project_prices SELECT 'default', model, input, output, cache_read, cache_write, reasoning, updated_at
FROM model_prices;
DROP TABLE model_prices;

CREATE TABLE users (
    id             TEXT PRIMARY KEY NOT NULL,
    name           TEXT NOT NULL UNIQUE,
    password_hash  TEXT NOT NULL,
    instance_admin INTEGER NOT NULL,
    created_at     INTEGER NOT NULL
);

CREATE TABLE memberships (
    project TEXT NOT NULL,
    user_id TEXT NOT NULL,
    role    TEXT NOT NULL,
    PRIMARY KEY (project, user_id)
) WITHOUT ROWID;
CREATE INDEX memberships_by_user ON memberships (user_id);

-- Keys are stored as the SHA-256 of the secret (a key is 32 random bytes, so
-- a fast hash is enough); `project` is NULL for an instance-admin key.
CREATE TABLE api_keys (
    id           TEXT PRIMARY KEY NOT NULL,
    name         TEXT NOT NULL,
    hash         TEXT NOT NULL UNIQUE,
    prefix       TEXT NOT NULL,
    project      TEXT,
    role         TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    created_by   TEXT,
    last_used_at INTEGER,
    revoked_at   INTEGER
);
CREATE INDEX api_keys_by_project ON api_keys (project, created_at DESC);

CREATE TABLE sessions (
    id         TEXT PRIMARY KEY NOT NULL,
    data       TEXT NOT NULL,
    expires_at INTEGER NOT NULL
);
CREATE INDEX sessions_by_expiry ON sessions (expires_at);

CREATE TABLE setup_tokens (
    hash       TEXT PRIMARY KEY NOT NULL,
    expires_at INTEGER NOT NULL
);

CREATE TABLE audit_log (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    project    TEXT,
    at         INTEGER NOT NULL,
    actor_id   TEXT NOT NULL,
    actor_name TEXT NOT NULL,
    action     TEXT NOT NULL,
    target     TEXT,
    detail     TEXT
);
CREATE INDEX audit_by_project ON audit_log (project, seq DESC);
