-- Saved agents and their versions; runs as trees of agent calls.
--
-- An agent's row holds its current version number and name (unique in the
-- project: it is the tool name other agents call it by); every save adds an
-- `agent_versions` row with the whole spec as JSON. A run records the agent
-- version it started from, the agent in charge now (a handoff changes it),
-- and, for a child run, the parent call that waits for it.

CREATE TABLE agents (
    id         TEXT PRIMARY KEY NOT NULL,
    project    TEXT NOT NULL,
    name       TEXT NOT NULL,
    version    INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE UNIQUE INDEX agents_by_name ON agents (project, name);

CREATE TABLE agent_versions (
    agent_id      TEXT NOT NULL,
    version       INTEGER NOT NULL,
    spec          TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    created_by_id TEXT,
    created_by    TEXT,
    PRIMARY KEY (agent_id, version)
) WITHOUT ROWID;

ALTER TABLE runs ADD COLUMN agent_version INTEGER;
ALTER TABLE runs ADD COLUMN agent_overrides TEXT NOT NULL DEFAULT '[]';
ALTER TABLE runs ADD COLUMN current_agent TEXT;
ALTER TABLE runs ADD COLUMN current_agent_version INTEGER;
ALTER TABLE runs ADD COLUMN sub_agents TEXT NOT NULL DEFAULT '[]';
ALTER TABLE runs ADD COLUMN handoffs TEXT NOT NULL DEFAULT '[]';
ALTER TABLE runs ADD COLUMN handoff_turns INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN parent_call_id TEXT;
-- NULL reads as the run itself (runs stored before this migration are roots).
ALTER TABLE runs ADD COLUMN root_run_id TEXT;
ALTER TABLE runs ADD COLUMN depth INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN child_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN metadata TEXT;
ALTER TABLE runs ADD COLUMN reasoning_traces INTEGER NOT NULL DEFAULT 0;

-- A run's children, in the order they started.
CREATE INDEX runs_children ON runs (parent_run_id, created_at, id) WHERE parent_call_id IS NOT NULL;
-- Root runs of a project, newest first (the runs list's default).
CREATE INDEX runs_roots_by_project ON runs (project, created_at DESC, id DESC) WHERE parent_call_id IS NULL;
-- An agent's runs per version (its page's statistics).
CREATE INDEX runs_by_agent_version ON runs (agent_id, agent_version);

ALTER TABLE tool_calls ADD COLUMN child_run_id TEXT;
