-- Grants: what lets a tool call that needs approval run. The runner's gate
-- (engine/src/runner/gate.rs) runs such a call only against a row here, and
-- a row is written only in the transaction of a decision by an approver of
-- the run's project (store `decide`). Nothing copies rows: forks, replays,
-- imports and child runs have other run ids, so they start with none.
--
-- scope 'call': the decided call alone, with exactly `arguments` (the final,
-- possibly edited, arguments). scope 'run': "always" for `tool_name` in this
-- run, until a follow-up continues the conversation (`ended_at`).
CREATE TABLE grants (
    run_id       TEXT NOT NULL,
    call_id      TEXT NOT NULL,
    tool_name    TEXT NOT NULL,
    scope        TEXT NOT NULL,
    arguments    TEXT NOT NULL,
    grantor_id   TEXT NOT NULL,
    grantor_name TEXT NOT NULL,
    grantor_role TEXT NOT NULL,
    granted_at   INTEGER NOT NULL,
    ended_at     INTEGER,
    PRIMARY KEY (run_id, call_id)
) WITHOUT ROWID;
CREATE INDEX grants_by_tool ON grants (run_id, tool_name, scope);

-- Decisions made before grants existed were made through the same decision
-- path (by an approver, checked by the server): an approved call that has
-- not run yet keeps its approval, and a live "always" keeps applying.
INSERT INTO grants (run_id, call_id, tool_name, scope, arguments, grantor_id, grantor_name, grantor_role, granted_at)
SELECT d.run_id, d.call_id, d.tool_name, CASE WHEN d.always THEN 'run' ELSE 'call' END,
       COALESCE(d.edited_arguments, d.original_arguments), COALESCE(d.decided_by_id, ''), d.decided_by, 'approver',
       d.decided_at
FROM approval_decisions d
WHERE d.decision = 'approved';

-- An "always" on an approval request applies to the agent that asked (the
-- key that created the request), not to anyone who names the same external
-- run id: rules are keyed by their requester. Rules from before carry no
-- requester and are dropped (the agent is asked again).
DROP TABLE request_rules;
CREATE TABLE request_rules (
    project         TEXT NOT NULL,
    requested_by_id TEXT NOT NULL,
    external_id     TEXT NOT NULL,
    tool            TEXT NOT NULL,
    outcome         TEXT NOT NULL,
    PRIMARY KEY (project, requested_by_id, external_id, tool)
) WITHOUT ROWID;
