-- A run's outcome (`done · 1 call rejected`) counts its rejected and failed
-- calls with every read of the run. These partial indexes hold only such
-- calls, keyed by run, so each count is one probe however long the run
-- (SQLite picks them over `tool_calls_outline` because both key columns
-- are equalities). The same indexes as migrations/postgres/0014_call_outcomes.sql.
CREATE INDEX tool_calls_rejected ON tool_calls (run_id, status) WHERE status = 'rejected';
CREATE INDEX tool_calls_failed ON tool_calls (run_id, status) WHERE status = 'failed';
