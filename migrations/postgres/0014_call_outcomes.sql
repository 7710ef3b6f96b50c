-- A run's outcome (`done · 1 call rejected`) counts its rejected and failed
-- calls with every read of the run. These partial indexes hold only such
-- calls, keyed by run, so each count is one probe however long the run.
-- The same indexes as migrations/sqlite/0025_call_outcomes.sql.
CREATE INDEX tool_calls_rejected ON tool_calls (run_id, status) WHERE status = 'rejected';
CREATE INDEX tool_calls_failed ON tool_calls (run_id, status) WHERE status = 'failed';
