-- Full-text search across a project's runs (`q` on the runs list): one row
-- per searchable piece of a run with its `tsvector`, kept up to date by
-- triggers, so every path that writes a run, a step, a tool call or a
-- message (the engine, the OTLP ingest, forks, imports) indexes it without
-- knowing. The same pieces and keys as migrations/sqlite/0028_run_search.sql,
-- where the run's part of a key is its rowid; here it is `runs.seq`, given
-- in insertion order as SQLite gives rowids:
--   seq << 28 | 0 << 26                      the run
--   seq << 28 | 1 << 26 | step index         a step's answer text or error
--   seq << 28 | 2 << 26 | step << 8 | pos    a tool call
--   seq << 28 | 3 << 26 | message seq        a person's follow-up message
-- Words are runs of letters and digits, lowercased, not stemmed: the
-- `simple` configuration over the body with everything else made a space,
-- as SQLite's unicode61 tokenizer reads it (an address `a@b.com` is the
-- words a, b and com on both). Bodies are cut at 65,536 characters.
ALTER TABLE runs ADD COLUMN seq BIGSERIAL;

CREATE TABLE run_text (
    key     BIGINT PRIMARY KEY,
    run_id  TEXT NOT NULL,
    project TEXT NOT NULL,
    body    TEXT NOT NULL,
    tsv     tsvector GENERATED ALWAYS AS (to_tsvector('simple', regexp_replace(body, '[^[:alnum:]]+', ' ', 'g'))) STORED
);
CREATE INDEX run_text_words ON run_text USING gin (tsv);
CREATE INDEX run_text_by_project ON run_text (project, key DESC);

CREATE VIEW run_text_of_runs AS
SELECT r.seq << 28 AS key, r.id AS run_id, r.project AS project,
    left(concat_ws(' ', r.name, r.initial_prompt, r.summary, r.failure_reason, r.result::text, r.metadata::text,
        r.end_user, r.session_id), 65536) AS body
FROM runs r;

CREATE VIEW run_text_of_steps AS
SELECT (r.seq << 28) | (1 << 26) | s.idx AS key, s.run_id AS run_id, s.idx AS idx, r.project AS project,
    left(coalesce(s.response->>'text', s.response->>'error'), 65536) AS body
FROM steps s JOIN runs r ON r.id = s.run_id
WHERE s.idx < 67108864;

CREATE VIEW run_text_of_calls AS
SELECT (r.seq << 28) | (2 << 26) | (c.step_idx << 8) | c.pos AS key, c.run_id AS run_id, c.step_idx AS step_idx,
    c.pos AS pos, r.project AS project,
    left(concat_ws(' ', c.tool_name, c.arguments::text, c.result::text, c.error), 65536) AS body
FROM tool_calls c JOIN runs r ON r.id = c.run_id
WHERE c.step_idx < 262144 AND c.pos < 256;

CREATE VIEW run_text_of_messages AS
SELECT (r.seq << 28) | (3 << 26) | m.seq AS key, m.run_id AS run_id, m.seq AS seq, r.project AS project,
    left(m.data->>'message', 65536) AS body
FROM messages m JOIN runs r ON r.id = m.run_id
WHERE m.type = 'human' AND m.seq > 0 AND m.seq < 67108864;

-- The runs stored before this migration.
INSERT INTO run_text (key, run_id, project, body)
SELECT key, run_id, project, body FROM run_text_of_runs
UNION ALL SELECT key, run_id, project, body FROM run_text_of_steps WHERE body <> ''
UNION ALL SELECT key, run_id, project, body FROM run_text_of_calls
UNION ALL SELECT key, run_id, project, body FROM run_text_of_messages WHERE body <> '';

CREATE FUNCTION run_text_runs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        DELETE FROM run_text WHERE key BETWEEN OLD.seq << 28 AND (OLD.seq << 28) + 268435455;
    ELSE
        INSERT INTO run_text (key, run_id, project, body)
        SELECT key, run_id, project, body FROM run_text_of_runs WHERE run_id = NEW.id
        ON CONFLICT (key) DO UPDATE SET body = EXCLUDED.body;
    END IF;
    RETURN NULL;
END;
$$;
CREATE TRIGGER run_text_runs AFTER INSERT OR DELETE ON runs FOR EACH ROW EXECUTE FUNCTION run_text_runs();
CREATE TRIGGER run_text_runs_update AFTER UPDATE ON runs FOR EACH ROW
WHEN (NEW.name IS DISTINCT FROM OLD.name OR NEW.initial_prompt IS DISTINCT FROM OLD.initial_prompt
    OR NEW.summary IS DISTINCT FROM OLD.summary OR NEW.failure_reason IS DISTINCT FROM OLD.failure_reason
    OR NEW.result IS DISTINCT FROM OLD.result OR NEW.metadata IS DISTINCT FROM OLD.metadata
    OR NEW.end_user IS DISTINCT FROM OLD.end_user OR NEW.session_id IS DISTINCT FROM OLD.session_id)
EXECUTE FUNCTION run_text_runs();

CREATE FUNCTION run_text_steps() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' AND OLD.idx < 67108864 THEN
        DELETE FROM run_text WHERE key = (SELECT (seq << 28) | (1 << 26) | OLD.idx FROM runs WHERE id = OLD.run_id);
    END IF;
    IF TG_OP <> 'DELETE' THEN
        INSERT INTO run_text (key, run_id, project, body)
        SELECT key, run_id, project, body FROM run_text_of_steps
        WHERE run_id = NEW.run_id AND idx = NEW.idx AND body <> ''
        ON CONFLICT (key) DO UPDATE SET body = EXCLUDED.body;
    END IF;
    RETURN NULL;
END;
$$;
CREATE TRIGGER run_text_steps AFTER INSERT OR DELETE ON steps FOR EACH ROW EXECUTE FUNCTION run_text_steps();
CREATE TRIGGER run_text_steps_update AFTER UPDATE ON steps FOR EACH ROW
WHEN (NEW.response IS DISTINCT FROM OLD.response) EXECUTE FUNCTION run_text_steps();

CREATE FUNCTION run_text_calls() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        IF OLD.step_idx < 262144 AND OLD.pos < 256 THEN
            DELETE FROM run_text
            WHERE key = (SELECT (seq << 28) | (2 << 26) | (OLD.step_idx << 8) | OLD.pos FROM runs WHERE id = OLD.run_id);
        END IF;
    ELSE
        INSERT INTO run_text (key, run_id, project, body)
        SELECT key, run_id, project, body FROM run_text_of_calls
        WHERE run_id = NEW.run_id AND step_idx = NEW.step_idx AND pos = NEW.pos
        ON CONFLICT (key) DO UPDATE SET body = EXCLUDED.body;
    END IF;
    RETURN NULL;
END;
$$;
CREATE TRIGGER run_text_calls AFTER INSERT OR DELETE ON tool_calls FOR EACH ROW EXECUTE FUNCTION run_text_calls();
CREATE TRIGGER run_text_calls_update AFTER UPDATE ON tool_calls FOR EACH ROW
WHEN (NEW.arguments IS DISTINCT FROM OLD.arguments OR NEW.result IS DISTINCT FROM OLD.result
    OR NEW.error IS DISTINCT FROM OLD.error OR NEW.tool_name IS DISTINCT FROM OLD.tool_name)
EXECUTE FUNCTION run_text_calls();

CREATE FUNCTION run_text_messages() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' AND OLD.seq < 67108864 THEN
        DELETE FROM run_text WHERE key = (SELECT (seq << 28) | (3 << 26) | OLD.seq FROM runs WHERE id = OLD.run_id);
    END IF;
    IF TG_OP <> 'DELETE' THEN
        INSERT INTO run_text (key, run_id, project, body)
        SELECT key, run_id, project, body FROM run_text_of_messages
        WHERE run_id = NEW.run_id AND seq = NEW.seq AND body <> ''
        ON CONFLICT (key) DO UPDATE SET body = EXCLUDED.body;
    END IF;
    RETURN NULL;
END;
$$;
CREATE TRIGGER run_text_messages AFTER INSERT OR DELETE ON messages FOR EACH ROW EXECUTE FUNCTION run_text_messages();
CREATE TRIGGER run_text_messages_update AFTER UPDATE ON messages FOR EACH ROW
WHEN (NEW.data IS DISTINCT FROM OLD.data) EXECUTE FUNCTION run_text_messages();
