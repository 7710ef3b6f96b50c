-- OTLP ingest (`POST /v1/traces`): the spans other agents send, kept as they
-- came, and the runs assembled from them (see engine/src/otel/ingest/).
--
-- A span is keyed by (project, trace, span): a re-sent span replaces itself.
-- Times are Unix nanoseconds as the spans carry them (INTEGER), attributes
-- a JSON object, events a JSON array, `kind` and `status_code` the OTLP
-- enum numbers.
CREATE TABLE otlp_spans (
    project        TEXT NOT NULL,
    trace_id       TEXT NOT NULL,
    span_id        TEXT NOT NULL,
    parent_span_id TEXT,
    name           TEXT NOT NULL,
    kind           INTEGER NOT NULL,
    start_ns       INTEGER NOT NULL,
    end_ns         INTEGER NOT NULL,
    attributes     TEXT NOT NULL,
    events         TEXT NOT NULL,
    status_code    INTEGER NOT NULL,
    status_message TEXT,
    service_name   TEXT,
    scope_name     TEXT,
    received_at    INTEGER NOT NULL,
    PRIMARY KEY (project, trace_id, span_id)
) WITHOUT ROWID;

-- Where a run runlens did not run came from, as JSON
-- (`{"kind": "otlp", "service", "trace_id"}`); NULL for runs runlens ran.
ALTER TABLE runs ADD COLUMN source TEXT;
