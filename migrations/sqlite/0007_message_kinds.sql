-- Issue 10: a resumed run counts its model turns (agent messages) through
-- this index instead of reading its whole transcript.
CREATE INDEX messages_by_type ON messages (run_id, type);
