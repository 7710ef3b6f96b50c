-- Review queues (see `model::review`): runs, or one step of a run, put in
-- front of people to score. `spec` is the JSON of the description, the
-- fields, the corrections' dataset and the assignees. An item's
-- `step_index` is -1 for the whole run; the unique index keeps a run (at a
-- step) in a queue once. The same tables as migrations/postgres/0025_review_queues.sql.
CREATE TABLE review_queues (
    id            TEXT PRIMARY KEY NOT NULL,
    project       TEXT NOT NULL,
    name          TEXT NOT NULL,
    spec          TEXT NOT NULL,
    created_by_id TEXT NOT NULL,
    created_by    TEXT NOT NULL,
    created_at    INTEGER NOT NULL
);
CREATE UNIQUE INDEX review_queues_by_name ON review_queues (project, name);

CREATE TABLE review_items (
    id          TEXT PRIMARY KEY NOT NULL,
    queue_id    TEXT NOT NULL,
    project     TEXT NOT NULL,
    run_id      TEXT NOT NULL,
    step_index  INTEGER NOT NULL,
    status      TEXT NOT NULL,
    reviewer_id TEXT,
    reviewer    TEXT,
    reviewed_at INTEGER,
    correction  TEXT,
    added_at    INTEGER NOT NULL
);
CREATE UNIQUE INDEX review_items_by_run ON review_items (queue_id, run_id, step_index);
CREATE INDEX review_items_by_status ON review_items (queue_id, status, id);
