-- Each tree of runs (a root run and every run its agent calls start, down
-- the tree) with its counters and bounds, kept in the database so that
-- concurrent children, on one server or several, share one budget: a child
-- run or a model turn is taken by one conditional UPDATE that applies only
-- under the bound, so no race can pass it. The bounds are fixed when the
-- tree is first counted (the server's, lowered by the root agent's
-- `tree_budget`); NULL `max_turns` / `max_tokens`: no bound.
-- The same table as migrations/sqlite/0022_run_trees.sql.

CREATE TABLE run_trees (
    root_run_id TEXT PRIMARY KEY,
    runs        BIGINT NOT NULL,
    turns       BIGINT NOT NULL,
    tokens      BIGINT NOT NULL,
    max_runs    BIGINT NOT NULL,
    max_depth   BIGINT NOT NULL,
    max_turns   BIGINT,
    max_tokens  BIGINT,
    created_at  BIGINT NOT NULL
);
