-- A project's own HTTP tools (`POST /api/tools/http`).
--
-- One row per tool, keyed by project and name (the tool name runs call it
-- by). `spec` holds what is shown (description, schema, url, timeout,
-- idempotent, requires_approval) as JSON; `headers` (name → value) and
-- `secret` (the HMAC key of `runlens-signature`) are secrets: sent with
-- each call, never returned by a read.

CREATE TABLE http_tools (
    project           TEXT NOT NULL,
    name              TEXT NOT NULL,
    spec              TEXT NOT NULL,
    headers           TEXT NOT NULL DEFAULT '{}',
    secret            TEXT NOT NULL,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL,
    updated_by_id     TEXT,
    updated_by        TEXT,
    secret_created_at INTEGER NOT NULL,
    PRIMARY KEY (project, name)
) WITHOUT ROWID;
