-- Each tree of runs (a root run and every run its agent calls start, down
-- the tree) with its counters and bounds, kept in the database so that
-- concurrent children, on one server or several, share one budget: a child
-- run or a model turn is taken by one conditional UPDATE that applies only
-- under the bound, so no race can pass it. The bounds are fixed when the
-- tree is first counted (the server's, lowered by the root agent's
-- `tree_budget`); NULL `max_turns` / `max_tokens`: no bound.

CREATE TABLE run_trees (
    root_run_id TEXT PRIMARY KEY NOT NULL,
    runs        INTEGER NOT NULL,
    turns       INTEGER NOT NULL,
    tokens      INTEGER NOT NULL,
    max_runs    INTEGER NOT NULL,
    max_depth   INTEGER NOT NULL,
    max_turns   INTEGER,
    max_tokens  INTEGER,
    created_at  INTEGER NOT NULL
) WITHOUT ROWID;
