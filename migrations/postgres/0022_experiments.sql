-- Experiments: an agent (or a run configuration) run over a dataset's items
-- at one version (see `model::experiment`). Each item's run carries the
-- experiment and the item (`runs.experiment_id`, `runs.experiment_item_id`),
-- and the unique index makes "each item runs once" the database's promise:
-- a second run of an item is refused whatever path tries it. A run's
-- `tool_answers` (JSON text) says what answers its tool calls instead of the
-- tools (recorded results or mocks); NULL: the tools run. The same tables as
-- migrations/sqlite/0033_experiments.sql.
ALTER TABLE runs ADD COLUMN tool_answers TEXT;
ALTER TABLE runs ADD COLUMN experiment_id TEXT;
ALTER TABLE runs ADD COLUMN experiment_item_id TEXT;
CREATE UNIQUE INDEX runs_by_experiment_item ON runs (experiment_id, experiment_item_id)
    WHERE experiment_id IS NOT NULL;

CREATE TABLE experiments (
    id              TEXT COLLATE "C" PRIMARY KEY NOT NULL,
    project         TEXT NOT NULL,
    name            TEXT NOT NULL,
    dataset_id      TEXT NOT NULL,
    dataset_name    TEXT NOT NULL,
    dataset_version BIGINT NOT NULL,
    item_count      BIGINT NOT NULL,
    status          TEXT NOT NULL,
    spec            TEXT NOT NULL,
    created_by_id   TEXT NOT NULL,
    created_by      TEXT NOT NULL,
    created_at      BIGINT NOT NULL,
    finished_at     BIGINT
);
CREATE INDEX experiments_by_project ON experiments (project, id);
CREATE INDEX experiments_running ON experiments (status) WHERE status = 'running';
