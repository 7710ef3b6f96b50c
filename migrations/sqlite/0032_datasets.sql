-- Datasets: a project's named, versioned sets of inputs with what they
-- should give (see `model::dataset`). `version` is 0 while empty and one
-- more with every change of the items; `item_count` counts the items at it.
--
-- An item is kept as one row per content it had: written at
-- `version_added`, closed by `version_removed` (the version that replaced
-- or deleted it; NULL while it is current). The items at version v are the
-- rows with version_added <= v AND (version_removed IS NULL OR
-- version_removed > v). JSON is kept as text (`expected` NULL for none).
-- The same tables as migrations/postgres/0021_datasets.sql.
CREATE TABLE datasets (
    id            TEXT PRIMARY KEY NOT NULL,
    project       TEXT NOT NULL,
    name          TEXT NOT NULL,
    description   TEXT NOT NULL,
    version       INTEGER NOT NULL,
    item_count    INTEGER NOT NULL,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL,
    created_by_id TEXT NOT NULL,
    created_by    TEXT NOT NULL
);
CREATE UNIQUE INDEX datasets_by_name ON datasets (project, name);

CREATE TABLE dataset_items (
    dataset_id       TEXT NOT NULL,
    id               TEXT NOT NULL,
    version_added    INTEGER NOT NULL,
    version_removed  INTEGER,
    input            TEXT NOT NULL,
    expected         TEXT,
    metadata         TEXT NOT NULL,
    tags             TEXT NOT NULL,
    source_run_id    TEXT,
    recorded_results TEXT NOT NULL,
    created_at       INTEGER NOT NULL,
    PRIMARY KEY (dataset_id, id, version_added)
) WITHOUT ROWID;
-- The current row of each item: what a change looks for.
CREATE INDEX dataset_items_current ON dataset_items (dataset_id, id) WHERE version_removed IS NULL;
