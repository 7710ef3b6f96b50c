-- Full-text search across a project's runs (`q` on the runs list): one
-- FTS5 row per searchable piece of a run, kept up to date by triggers, so
-- every path that writes a run, a step, a tool call or a message (the
-- engine, the OTLP ingest, forks, imports) indexes it without knowing.
--
-- A piece's rowid says where it is: the run's rowid << 28, then two bits of
-- kind and 26 bits of place (see engine/src/store/sql/search.rs):
--   0 << 26                      the run: name, prompt, summary, failure, result, metadata
--   1 << 26 | step index         a step's answer text, or the error that failed it
--   2 << 26 | step << 8 | pos    a tool call: its tool, arguments, result and error
--   3 << 26 | seq                a person's follow-up message
-- so the newest run's pieces come first in rowid order, and a search reads
-- the index newest first and stops at a page. A piece past those ranges is
-- not indexed (never an error). Bodies are cut at 65,536 characters.
-- The same pieces as migrations/postgres/0017_run_search.sql.
CREATE VIRTUAL TABLE run_text USING fts5 (project, body, tokenize = 'unicode61 remove_diacritics 2');

CREATE VIEW run_text_of_runs AS
SELECT r.rowid << 28 AS key, r.id AS run_id, r.project AS project,
    substr(concat_ws(' ', r.name, r.initial_prompt, r.summary, r.failure_reason, r.result, r.metadata, r.end_user,
        r.session_id), 1, 65536) AS body
FROM runs r;

CREATE VIEW run_text_of_steps AS
SELECT (r.rowid << 28) | (1 << 26) | s.idx AS key, s.run_id AS run_id, s.idx AS idx, r.project AS project,
    substr(CASE WHEN json_valid(s.response)
        THEN coalesce(json_extract(s.response, '$.text'), json_extract(s.response, '$.error')) END, 1, 65536) AS body
FROM steps s JOIN runs r ON r.id = s.run_id
WHERE s.idx < 67108864;

CREATE VIEW run_text_of_calls AS
SELECT (r.rowid << 28) | (2 << 26) | (c.step_idx << 8) | c.pos AS key, c.run_id AS run_id, c.step_idx AS step_idx,
    c.pos AS pos, r.project AS project,
    substr(concat_ws(' ', c.tool_name, c.arguments, c.result, c.error), 1, 65536) AS body
FROM tool_calls c JOIN runs r ON r.id = c.run_id
WHERE c.step_idx < 262144 AND c.pos < 256;

CREATE VIEW run_text_of_messages AS
SELECT (r.rowid << 28) | (3 << 26) | m.seq AS key, m.run_id AS run_id, m.seq AS seq, r.project AS project,
    substr(CASE WHEN json_valid(m.data) THEN json_extract(m.data, '$.message') END, 1, 65536) AS body
FROM messages m JOIN runs r ON r.id = m.run_id
WHERE m.type = 'human' AND m.seq > 0 AND m.seq < 67108864;

-- The runs stored before this migration.
INSERT INTO run_text (rowid, project, body) SELECT key, project, body FROM run_text_of_runs;
INSERT INTO run_text (rowid, project, body) SELECT key, project, body FROM run_text_of_steps WHERE body <> '';
INSERT INTO run_text (rowid, project, body) SELECT key, project, body FROM run_text_of_calls;
INSERT INTO run_text (rowid, project, body) SELECT key, project, body FROM run_text_of_messages WHERE body <> '';

CREATE TRIGGER run_text_run_insert AFTER INSERT ON runs BEGIN
    INSERT OR REPLACE INTO run_text (rowid, project, body)
    SELECT key, project, body FROM run_text_of_runs WHERE run_id = NEW.id;
END;
CREATE TRIGGER run_text_run_update AFTER UPDATE ON runs
WHEN NEW.name IS NOT OLD.name OR NEW.initial_prompt IS NOT OLD.initial_prompt OR NEW.summary IS NOT OLD.summary
    OR NEW.failure_reason IS NOT OLD.failure_reason OR NEW.result IS NOT OLD.result
    OR NEW.metadata IS NOT OLD.metadata OR NEW.end_user IS NOT OLD.end_user OR NEW.session_id IS NOT OLD.session_id
BEGIN
    INSERT OR REPLACE INTO run_text (rowid, project, body)
    SELECT key, project, body FROM run_text_of_runs WHERE run_id = NEW.id;
END;
CREATE TRIGGER run_text_run_delete AFTER DELETE ON runs BEGIN
    DELETE FROM run_text WHERE rowid BETWEEN OLD.rowid << 28 AND (OLD.rowid << 28) + 268435455;
END;

CREATE TRIGGER run_text_step_insert AFTER INSERT ON steps BEGIN
    INSERT OR REPLACE INTO run_text (rowid, project, body)
    SELECT key, project, body FROM run_text_of_steps WHERE run_id = NEW.run_id AND idx = NEW.idx AND body <> '';
END;
CREATE TRIGGER run_text_step_update AFTER UPDATE ON steps WHEN NEW.response IS NOT OLD.response BEGIN
    DELETE FROM run_text WHERE rowid = (SELECT key FROM run_text_of_steps WHERE run_id = OLD.run_id AND idx = OLD.idx);
    INSERT INTO run_text (rowid, project, body)
    SELECT key, project, body FROM run_text_of_steps WHERE run_id = NEW.run_id AND idx = NEW.idx AND body <> '';
END;
CREATE TRIGGER run_text_step_delete AFTER DELETE ON steps WHEN OLD.idx < 67108864 BEGIN
    DELETE FROM run_text WHERE rowid = (SELECT (rowid << 28) | (1 << 26) | OLD.idx FROM runs WHERE id = OLD.run_id);
END;

CREATE TRIGGER run_text_call_insert AFTER INSERT ON tool_calls BEGIN
    INSERT OR REPLACE INTO run_text (rowid, project, body)
    SELECT key, project, body FROM run_text_of_calls WHERE run_id = NEW.run_id AND step_idx = NEW.step_idx
        AND pos = NEW.pos;
END;
CREATE TRIGGER run_text_call_update AFTER UPDATE ON tool_calls
WHEN NEW.arguments IS NOT OLD.arguments OR NEW.result IS NOT OLD.result OR NEW.error IS NOT OLD.error
    OR NEW.tool_name IS NOT OLD.tool_name
BEGIN
    INSERT OR REPLACE INTO run_text (rowid, project, body)
    SELECT key, project, body FROM run_text_of_calls WHERE run_id = NEW.run_id AND step_idx = NEW.step_idx
        AND pos = NEW.pos;
END;
CREATE TRIGGER run_text_call_delete AFTER DELETE ON tool_calls WHEN OLD.step_idx < 262144 AND OLD.pos < 256 BEGIN
    DELETE FROM run_text
    WHERE rowid = (SELECT (rowid << 28) | (2 << 26) | (OLD.step_idx << 8) | OLD.pos FROM runs WHERE id = OLD.run_id);
END;

CREATE TRIGGER run_text_message_insert AFTER INSERT ON messages BEGIN
    INSERT OR REPLACE INTO run_text (rowid, project, body)
    SELECT key, project, body FROM run_text_of_messages WHERE run_id = NEW.run_id AND seq = NEW.seq AND body <> '';
END;
CREATE TRIGGER run_text_message_update AFTER UPDATE ON messages WHEN NEW.data IS NOT OLD.data BEGIN
    DELETE FROM run_text WHERE rowid = (SELECT key FROM run_text_of_messages WHERE run_id = OLD.run_id AND seq = OLD.seq);
    INSERT INTO run_text (rowid, project, body)
    SELECT key, project, body FROM run_text_of_messages WHERE run_id = NEW.run_id AND seq = NEW.seq AND body <> '';
END;
CREATE TRIGGER run_text_message_delete AFTER DELETE ON messages WHEN OLD.seq < 67108864 BEGIN
    DELETE FROM run_text WHERE rowid = (SELECT (rowid << 28) | (3 << 26) | OLD.seq FROM runs WHERE id = OLD.run_id);
END;
