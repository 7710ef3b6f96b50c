-- Issue 17: the approvals inbox over a million pending calls, and the
-- navigation badge's count in O(1).
--
-- `pending_calls` has one row per tool call awaiting a decision on a paused
-- run (exactly the calls the inbox lists), with the run's project copied in
-- and clustered on the inbox's order within a project: oldest first, by
-- (requested_at, run_id, step_idx, pos). A page of the inbox is one range of
-- it (`pending_calls_by_tool` for one tool, `pending_calls_by_call` for one
-- run), joined to `tool_calls` and `runs` by their keys for the rest.
-- `pending_counts` holds each project's number of such rows.
--
-- Triggers keep both in step with `tool_calls` and `runs` inside the
-- transaction of whatever statement changes them (a pause, a decision, a
-- cancel, a failed run, an import, OTLP ingest, a deleted row), so no writer
-- can forget them. The store upserts calls with `INSERT OR REPLACE`, whose
-- delete of the old row fires no delete trigger (recursive_triggers is off):
-- a BEFORE INSERT trigger takes the old row's entry out first and the AFTER
-- INSERT one puts the new row's in. So `tool_calls` must keep being written
-- by INSERT [OR REPLACE], UPDATE and DELETE: an upsert with `ON CONFLICT DO
-- NOTHING` (or a DO UPDATE that skips `status`) would lose the entry the
-- BEFORE trigger took out. A statement's `OR REPLACE` also overrides the
-- conflict clause of every statement in the triggers it fires, so none of
-- them relies on one: each insert is guarded by NOT EXISTS and can never
-- conflict, and the count moves only in `pending_calls`' own insert and
-- delete triggers, once per row actually added or removed.

CREATE TABLE pending_calls (
    project      TEXT NOT NULL,
    requested_at INTEGER NOT NULL,
    run_id       TEXT NOT NULL,
    step_idx     INTEGER NOT NULL,
    pos          INTEGER NOT NULL,
    tool_name    TEXT NOT NULL,
    PRIMARY KEY (project, requested_at, run_id, step_idx, pos)
) WITHOUT ROWID;
CREATE UNIQUE INDEX pending_calls_by_call ON pending_calls (run_id, step_idx, pos);
CREATE INDEX pending_calls_by_tool ON pending_calls (project, tool_name, requested_at, run_id, step_idx, pos);

CREATE TABLE pending_counts (
    project TEXT PRIMARY KEY NOT NULL,
    n       INTEGER NOT NULL
) WITHOUT ROWID;

-- A run's calls awaiting a decision from a small index instead of all its
-- calls (the triggers below name it: without statistics SQLite would take
-- the wider `tool_calls_outline` and walk every call of a long run).
DROP INDEX tool_calls_awaiting;
CREATE INDEX tool_calls_awaiting_by_run ON tool_calls (run_id, step_idx, pos) WHERE status = 'awaiting_approval';

-- What is pending now.
INSERT INTO pending_calls (project, requested_at, run_id, step_idx, pos, tool_name)
SELECT r.project, coalesce(tc.requested_at, 0), tc.run_id, tc.step_idx, tc.pos, tc.tool_name
FROM tool_calls tc JOIN runs r ON r.id = tc.run_id
WHERE tc.status = 'awaiting_approval' AND r.status = 'paused';
INSERT INTO pending_counts (project, n) SELECT project, count(*) FROM pending_calls GROUP BY project;

-- The count follows the rows.
CREATE TRIGGER pending_calls_counted AFTER INSERT ON pending_calls
BEGIN
    INSERT INTO pending_counts (project, n) SELECT NEW.project, 0
    WHERE NOT EXISTS (SELECT 1 FROM pending_counts WHERE project = NEW.project);
    UPDATE pending_counts SET n = n + 1 WHERE project = NEW.project;
END;

CREATE TRIGGER pending_calls_uncounted AFTER DELETE ON pending_calls
BEGIN
    UPDATE pending_counts SET n = n - 1 WHERE project = OLD.project;
END;

-- Tool calls: a call that comes to await a decision on a paused run is
-- added; one that stops awaiting, changes, or goes is taken out.
CREATE TRIGGER tool_calls_pending_replaced BEFORE INSERT ON tool_calls
BEGIN
    DELETE FROM pending_calls WHERE run_id = NEW.run_id AND step_idx = NEW.step_idx AND pos = NEW.pos;
END;

CREATE TRIGGER tool_calls_pending_inserted AFTER INSERT ON tool_calls
WHEN NEW.status = 'awaiting_approval'
BEGIN
    INSERT INTO pending_calls (project, requested_at, run_id, step_idx, pos, tool_name)
    SELECT r.project, coalesce(NEW.requested_at, 0), NEW.run_id, NEW.step_idx, NEW.pos, NEW.tool_name
    FROM runs r
    WHERE r.id = NEW.run_id AND r.status = 'paused'
      AND NOT EXISTS (SELECT 1 FROM pending_calls p
                      WHERE p.run_id = NEW.run_id AND p.step_idx = NEW.step_idx AND p.pos = NEW.pos);
END;

CREATE TRIGGER tool_calls_pending_updated AFTER UPDATE OF run_id, step_idx, pos, status, requested_at, tool_name
ON tool_calls
WHEN (OLD.status = 'awaiting_approval' OR NEW.status = 'awaiting_approval')
    AND (OLD.status IS NOT NEW.status OR OLD.requested_at IS NOT NEW.requested_at
         OR OLD.tool_name IS NOT NEW.tool_name OR OLD.run_id IS NOT NEW.run_id
         OR OLD.step_idx IS NOT NEW.step_idx OR OLD.pos IS NOT NEW.pos)
BEGIN
    DELETE FROM pending_calls WHERE run_id = OLD.run_id AND step_idx = OLD.step_idx AND pos = OLD.pos;
    INSERT INTO pending_calls (project, requested_at, run_id, step_idx, pos, tool_name)
    SELECT r.project, coalesce(NEW.requested_at, 0), NEW.run_id, NEW.step_idx, NEW.pos, NEW.tool_name
    FROM runs r
    WHERE NEW.status = 'awaiting_approval' AND r.id = NEW.run_id AND r.status = 'paused'
      AND NOT EXISTS (SELECT 1 FROM pending_calls p
                      WHERE p.run_id = NEW.run_id AND p.step_idx = NEW.step_idx AND p.pos = NEW.pos);
END;

CREATE TRIGGER tool_calls_pending_deleted AFTER DELETE ON tool_calls
WHEN OLD.status = 'awaiting_approval'
BEGIN
    DELETE FROM pending_calls WHERE run_id = OLD.run_id AND step_idx = OLD.step_idx AND pos = OLD.pos;
END;

-- Runs: pausing adds the run's calls awaiting a decision; leaving `paused`
-- (resumed, cancelled, failed) or going takes them out; a run stored
-- already paused (an import) brings its calls in.
CREATE TRIGGER runs_pending_inserted AFTER INSERT ON runs
WHEN NEW.status = 'paused'
BEGIN
    INSERT INTO pending_calls (project, requested_at, run_id, step_idx, pos, tool_name)
    SELECT NEW.project, coalesce(tc.requested_at, 0), tc.run_id, tc.step_idx, tc.pos, tc.tool_name
    FROM tool_calls tc INDEXED BY tool_calls_awaiting_by_run
    WHERE tc.run_id = NEW.id AND tc.status = 'awaiting_approval'
      AND NOT EXISTS (SELECT 1 FROM pending_calls p
                      WHERE p.run_id = tc.run_id AND p.step_idx = tc.step_idx AND p.pos = tc.pos);
END;

CREATE TRIGGER runs_pending_updated AFTER UPDATE OF id, status, project ON runs
WHEN (OLD.status = 'paused' OR NEW.status = 'paused')
    AND (OLD.status IS NOT NEW.status OR OLD.project IS NOT NEW.project OR OLD.id IS NOT NEW.id)
BEGIN
    DELETE FROM pending_calls WHERE run_id = OLD.id;
    INSERT INTO pending_calls (project, requested_at, run_id, step_idx, pos, tool_name)
    SELECT NEW.project, coalesce(tc.requested_at, 0), tc.run_id, tc.step_idx, tc.pos, tc.tool_name
    FROM tool_calls tc INDEXED BY tool_calls_awaiting_by_run
    WHERE NEW.status = 'paused' AND tc.run_id = NEW.id AND tc.status = 'awaiting_approval'
      AND NOT EXISTS (SELECT 1 FROM pending_calls p
                      WHERE p.run_id = tc.run_id AND p.step_idx = tc.step_idx AND p.pos = tc.pos);
END;

CREATE TRIGGER runs_pending_deleted AFTER DELETE ON runs
WHEN OLD.status = 'paused'
BEGIN
    DELETE FROM pending_calls WHERE run_id = OLD.id;
END;
