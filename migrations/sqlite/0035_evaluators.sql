-- Online evaluators (see `model::evaluator`): scorers that score a sample
-- of a project's runs as they end. `spec` is the JSON of the target, the
-- sample and the scorers; the worker reads the runs that ended after
-- (`cursor_at`, `cursor_id`) in the order of `runs_by_project_finished`,
-- and moves the cursor past each run it has looked at, so a run is looked
-- at once, after a crash too (a scorer's score is kept once per run by name).
-- The same table as migrations/postgres/0024_evaluators.sql.
CREATE TABLE evaluators (
    id            TEXT PRIMARY KEY NOT NULL,
    project       TEXT NOT NULL,
    name          TEXT NOT NULL,
    spec          TEXT NOT NULL,
    enabled       INTEGER NOT NULL,
    cursor_at     INTEGER NOT NULL,
    cursor_id     TEXT NOT NULL,
    runs_seen     INTEGER NOT NULL DEFAULT 0,
    runs_scored   INTEGER NOT NULL DEFAULT 0,
    created_by_id TEXT NOT NULL,
    created_by    TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
);
CREATE UNIQUE INDEX evaluators_by_name ON evaluators (project, name);
CREATE INDEX runs_by_project_finished ON runs (project, finished_at, id) WHERE finished_at IS NOT NULL;
