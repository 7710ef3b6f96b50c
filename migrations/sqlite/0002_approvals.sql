-- Approvals: the run's policy and "always" lists, per-call approval state,
-- and an audit table with at most one decision per call.

ALTER TABLE runs ADD COLUMN approval TEXT NOT NULL DEFAULT '{}';
ALTER TABLE runs ADD COLUMN always_approve TEXT NOT NULL DEFAULT '[]';
ALTER TABLE runs ADD COLUMN always_reject TEXT NOT NULL DEFAULT '[]';

ALTER TABLE tool_calls ADD COLUMN reasoning TEXT;
ALTER TABLE tool_calls ADD COLUMN requested_at INTEGER;
ALTER TABLE tool_calls ADD COLUMN approval TEXT;

-- The inbox reads only the (few) calls awaiting a decision.
CREATE INDEX tool_calls_awaiting ON tool_calls (requested_at) WHERE status = 'awaiting_approval';

CREATE TABLE approval_decisions (
    run_id             TEXT NOT NULL,
    call_id            TEXT NOT NULL,
    step_idx           INTEGER NOT NULL,
    tool_name          TEXT NOT NULL,
    decision           TEXT NOT NULL,
    decided_by         TEXT NOT NULL,
    decided_at         INTEGER NOT NULL,
    always             INTEGER NOT NULL,
    original_arguments TEXT NOT NULL,
    edited_arguments   TEXT,
    comment            TEXT,
    PRIMARY KEY (run_id, call_id)
) WITHOUT ROWID;
