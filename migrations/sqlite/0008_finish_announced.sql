-- A run that reached a terminal status but whose `run.finished` event is not
-- stored yet: the flag is set by the status change and cleared when the event
-- commits. A crash between the two leaves it set, and the next start
-- publishes the missing event, so every finished run's stream ends with
-- `run.finished` (a client following it would otherwise wait forever).
ALTER TABLE runs ADD COLUMN finish_unannounced INTEGER NOT NULL DEFAULT 0;
CREATE INDEX runs_finish_unannounced ON runs (id) WHERE finish_unannounced = 1;
