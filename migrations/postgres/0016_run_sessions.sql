-- Sessions: the conversation or thread a run belongs to, and the end user
-- it served (given at create, or named by an ingested trace's spans). Each
-- has an index in the runs list's order, for the list's filters and the
-- session page. The same columns as migrations/sqlite/0027_run_sessions.sql.
ALTER TABLE runs ADD COLUMN session_id TEXT;
ALTER TABLE runs ADD COLUMN end_user TEXT;
CREATE INDEX runs_by_session ON runs (project, session_id, created_at, id) WHERE session_id IS NOT NULL;
CREATE INDEX runs_by_end_user ON runs (project, end_user, created_at, id) WHERE end_user IS NOT NULL;
