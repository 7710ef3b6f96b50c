-- Grants: what lets a tool call that needs approval run; the same table as
-- migrations/sqlite/0020_grants.sql (see there).
CREATE TABLE grants (
    run_id       TEXT NOT NULL,
    call_id      TEXT NOT NULL,
    tool_name    TEXT NOT NULL,
    scope        TEXT NOT NULL,
    arguments    TEXT NOT NULL,
    grantor_id   TEXT NOT NULL,
    grantor_name TEXT NOT NULL,
    grantor_role TEXT NOT NULL,
    granted_at   BIGINT NOT NULL,
    ended_at     BIGINT,
    PRIMARY KEY (run_id, call_id)
);
CREATE INDEX grants_by_tool ON grants (run_id, tool_name, scope);

INSERT INTO grants (run_id, call_id, tool_name, scope, arguments, grantor_id, grantor_name, grantor_role, granted_at)
SELECT d.run_id, d.call_id, d.tool_name, CASE WHEN d.always THEN 'run' ELSE 'call' END,
       COALESCE(d.edited_arguments, d.original_arguments)::text, COALESCE(d.decided_by_id, ''), d.decided_by,
       'approver', d.decided_at
FROM approval_decisions d
WHERE d.decision = 'approved';

-- "Always" rules of approval requests are keyed by their requester (see
-- migrations/sqlite/0020_grants.sql).
DROP TABLE request_rules;
CREATE TABLE request_rules (
    project         TEXT NOT NULL,
    requested_by_id TEXT NOT NULL,
    external_id     TEXT NOT NULL,
    tool            TEXT NOT NULL,
    outcome         TEXT NOT NULL,
    PRIMARY KEY (project, requested_by_id, external_id, tool)
);
