-- Issue 17: the approvals inbox over a million pending calls, and the
-- navigation badge's count in O(1). The same tables as
-- migrations/sqlite/0015_pending_inbox.sql.
--
-- `pending_calls` has one row per tool call awaiting a decision on a paused
-- run (exactly the calls the inbox lists), with the run's project copied in,
-- keyed on the inbox's order within a project: oldest first, by
-- (requested_at, run_id, step_idx, pos). A page of the inbox is one range of
-- its primary key (of `pending_calls_by_tool` for one tool,
-- `pending_calls_by_call` for one run), joined to `tool_calls` and `runs` by
-- their keys for the rest. `pending_counts` holds each project's number of
-- such rows.
--
-- Triggers keep both in step with `tool_calls` and `runs` inside the
-- transaction of whatever statement changes them (a pause, a decision, a
-- cancel, a failed run, an import, OTLP ingest, a deleted row), so no writer
-- can forget them; the store's upsert of a call (`ON CONFLICT DO UPDATE`)
-- fires the update trigger with the old and the new row. Each insert into
-- `pending_calls` skips a row already there (`ON CONFLICT DO NOTHING`), and
-- the count moves only in `pending_calls`' own triggers, once per row
-- actually added or removed.
--
-- Concurrent transactions that change one project's pending calls take
-- turns on its `pending_counts` row from that change to their commit. The
-- check that a call's run is paused reads the committed run: a call comes to
-- await a decision only in the run's own driver (or in the import that
-- creates the run), which is also what pauses it, so the two never race.

CREATE TABLE pending_calls (
    project      TEXT NOT NULL,
    requested_at BIGINT NOT NULL,
    run_id       TEXT NOT NULL,
    step_idx     BIGINT NOT NULL,
    pos          BIGINT NOT NULL,
    tool_name    TEXT NOT NULL,
    PRIMARY KEY (project, requested_at, run_id, step_idx, pos)
);
CREATE UNIQUE INDEX pending_calls_by_call ON pending_calls (run_id, step_idx, pos);
CREATE INDEX pending_calls_by_tool ON pending_calls (project, tool_name, requested_at, run_id, step_idx, pos);

CREATE TABLE pending_counts (
    project TEXT PRIMARY KEY,
    n       BIGINT NOT NULL
);

-- A run's calls awaiting a decision from a small index instead of all its calls.
DROP INDEX tool_calls_awaiting;
CREATE INDEX tool_calls_awaiting_by_run ON tool_calls (run_id, step_idx, pos) WHERE status = 'awaiting_approval';

-- What is pending now.
INSERT INTO pending_calls (project, requested_at, run_id, step_idx, pos, tool_name)
SELECT r.project, coalesce(tc.requested_at, 0), tc.run_id, tc.step_idx, tc.pos, tc.tool_name
FROM tool_calls tc JOIN runs r ON r.id = tc.run_id
WHERE tc.status = 'awaiting_approval' AND r.status = 'paused';
INSERT INTO pending_counts (project, n) SELECT project, count(*) FROM pending_calls GROUP BY project;

-- The count follows the rows.
CREATE FUNCTION pending_calls_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO pending_counts (project, n) VALUES (NEW.project, 1)
        ON CONFLICT (project) DO UPDATE SET n = pending_counts.n + 1;
    ELSE
        UPDATE pending_counts SET n = n - 1 WHERE project = OLD.project;
    END IF;
    RETURN NULL;
END;
$$;
CREATE TRIGGER pending_calls_count AFTER INSERT OR DELETE ON pending_calls
FOR EACH ROW EXECUTE FUNCTION pending_calls_count();

-- Tool calls: a call that comes to await a decision on a paused run is
-- added; one that stops awaiting, changes, or goes is taken out.
CREATE FUNCTION tool_calls_pending() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.status = 'awaiting_approval' THEN
        DELETE FROM pending_calls WHERE run_id = OLD.run_id AND step_idx = OLD.step_idx AND pos = OLD.pos;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') AND NEW.status = 'awaiting_approval' THEN
        INSERT INTO pending_calls (project, requested_at, run_id, step_idx, pos, tool_name)
        SELECT r.project, coalesce(NEW.requested_at, 0), NEW.run_id, NEW.step_idx, NEW.pos, NEW.tool_name
        FROM runs r WHERE r.id = NEW.run_id AND r.status = 'paused'
        ON CONFLICT DO NOTHING;
    END IF;
    RETURN NULL;
END;
$$;
CREATE TRIGGER tool_calls_pending_inserted AFTER INSERT ON tool_calls
FOR EACH ROW WHEN (NEW.status = 'awaiting_approval')
EXECUTE FUNCTION tool_calls_pending();
CREATE TRIGGER tool_calls_pending_updated AFTER UPDATE OF run_id, step_idx, pos, status, requested_at, tool_name
ON tool_calls
FOR EACH ROW WHEN ((OLD.status = 'awaiting_approval' OR NEW.status = 'awaiting_approval')
    AND (OLD.status IS DISTINCT FROM NEW.status OR OLD.requested_at IS DISTINCT FROM NEW.requested_at
         OR OLD.tool_name IS DISTINCT FROM NEW.tool_name OR OLD.run_id IS DISTINCT FROM NEW.run_id
         OR OLD.step_idx IS DISTINCT FROM NEW.step_idx OR OLD.pos IS DISTINCT FROM NEW.pos))
EXECUTE FUNCTION tool_calls_pending();
CREATE TRIGGER tool_calls_pending_deleted AFTER DELETE ON tool_calls
FOR EACH ROW WHEN (OLD.status = 'awaiting_approval')
EXECUTE FUNCTION tool_calls_pending();

-- Runs: pausing adds the run's calls awaiting a decision; leaving `paused`
-- (resumed, cancelled, failed) or going takes them out; a run stored
-- already paused (an import) brings its calls in.
CREATE FUNCTION runs_pending() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.status = 'paused' THEN
        DELETE FROM pending_calls WHERE run_id = OLD.id;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') AND NEW.status = 'paused' THEN
        INSERT INTO pending_calls (project, requested_at, run_id, step_idx, pos, tool_name)
        SELECT NEW.project, coalesce(tc.requested_at, 0), tc.run_id, tc.step_idx, tc.pos, tc.tool_name
        FROM tool_calls tc WHERE tc.run_id = NEW.id AND tc.status = 'awaiting_approval'
        ON CONFLICT DO NOTHING;
    END IF;
    RETURN NULL;
END;
$$;
CREATE TRIGGER runs_pending_inserted AFTER INSERT ON runs
FOR EACH ROW WHEN (NEW.status = 'paused')
EXECUTE FUNCTION runs_pending();
CREATE TRIGGER runs_pending_updated AFTER UPDATE OF id, status, project ON runs
FOR EACH ROW WHEN ((OLD.status = 'paused' OR NEW.status = 'paused')
    AND (OLD.status IS DISTINCT FROM NEW.status OR OLD.project IS DISTINCT FROM NEW.project
         OR OLD.id IS DISTINCT FROM NEW.id))
EXECUTE FUNCTION runs_pending();
CREATE TRIGGER runs_pending_deleted AFTER DELETE ON runs
FOR EACH ROW WHEN (OLD.status = 'paused')
EXECUTE FUNCTION runs_pending();
