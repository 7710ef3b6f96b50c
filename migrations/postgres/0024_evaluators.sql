-- Online evaluators (see `model::evaluator`): scorers that score a sample
-- of a project's runs as they end. `spec` is the JSON of the target, the
-- sample and the scorers; the worker reads the runs that ended after
-- (`cursor_at`, `cursor_id`) in the order of `runs_by_project_finished`,
-- and moves the cursor past each run it has looked at, so a run is looked
-- at once, after a crash too (a scorer's score is kept once per run by name).
-- The same table as migrations/sqlite/0035_evaluators.sql.
CREATE TABLE evaluators (
    id            TEXT COLLATE "C" PRIMARY KEY NOT NULL,
    project       TEXT NOT NULL,
    name          TEXT NOT NULL,
    spec          TEXT NOT NULL,
    enabled       BIGINT NOT NULL,
    cursor_at     BIGINT NOT NULL,
    cursor_id     TEXT NOT NULL,
    runs_seen     BIGINT NOT NULL DEFAULT 0,
    runs_scored   BIGINT NOT NULL DEFAULT 0,
    created_by_id TEXT NOT NULL,
    created_by    TEXT NOT NULL,
    created_at    BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL
);
CREATE UNIQUE INDEX evaluators_by_name ON evaluators (project, name);
CREATE INDEX runs_by_project_finished ON runs (project, finished_at, id) WHERE finished_at IS NOT NULL;
