-- Scores: judgements attached to a run, or one of its steps or tool calls,
-- by a person, a program (`POST /api/scores`) or a scorer. `value` is the
-- JSON of the value (a number, true/false or a label); `number` the value as
-- a number where it is one (yes = 1), for averages. Deleted with their run.
-- The same table as migrations/sqlite/0031_scores.sql.
CREATE TABLE scores (
    id         TEXT PRIMARY KEY NOT NULL,
    project    TEXT NOT NULL,
    run_id     TEXT NOT NULL,
    step_index BIGINT,
    call_id    TEXT,
    name       TEXT NOT NULL,
    value      TEXT NOT NULL,
    number     DOUBLE PRECISION,
    comment    TEXT,
    source     TEXT NOT NULL,
    author_id  TEXT NOT NULL,
    author     TEXT NOT NULL,
    scorer     TEXT,
    created_at BIGINT NOT NULL
);
CREATE INDEX scores_by_run ON scores (run_id, created_at, id);
CREATE INDEX scores_by_project_name ON scores (project, name, created_at);
