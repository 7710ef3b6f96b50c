-- Review queues of sessions: an item for a whole session keeps its
-- `session_id`, `step_index` -2, and as `run_id` the session's latest run
-- when it was added (its verdict's scores and correction are kept there).
-- A session is in a queue once. The same change as
-- migrations/postgres/0027_review_sessions.sql.
ALTER TABLE review_items ADD COLUMN session_id TEXT;
CREATE UNIQUE INDEX review_items_by_session ON review_items (queue_id, session_id) WHERE session_id IS NOT NULL;
