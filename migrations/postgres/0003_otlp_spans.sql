-- OTLP ingest (`POST /v1/traces`): the spans other agents send, kept as they
-- came, and the runs assembled from them (see engine/src/otel/ingest/). The
-- same table and column as migrations/sqlite/0014_otlp_spans.sql.
--
-- A span is keyed by (project, trace, span): a re-sent span replaces itself.
-- Times are Unix nanoseconds as the spans carry them, attributes a JSONB
-- object, events a JSONB array, `kind` and `status_code` the OTLP enum numbers.
CREATE TABLE otlp_spans (
    project        TEXT NOT NULL,
    trace_id       TEXT NOT NULL,
    span_id        TEXT NOT NULL,
    parent_span_id TEXT,
    name           TEXT NOT NULL,
    kind           BIGINT NOT NULL,
    start_ns       BIGINT NOT NULL,
    end_ns         BIGINT NOT NULL,
    attributes     JSONB NOT NULL,
    events         JSONB NOT NULL,
    status_code    BIGINT NOT NULL,
    status_message TEXT,
    service_name   TEXT,
    scope_name     TEXT,
    received_at    BIGINT NOT NULL,
    PRIMARY KEY (project, trace_id, span_id)
);

-- Where a run runlens did not run came from (`{"kind": "otlp", "service",
-- "trace_id"}`); NULL for runs runlens ran. Such runs are never driven: the
-- queue of work below skips them (see `ClusterStore::claim_next`).
ALTER TABLE runs ADD COLUMN source JSONB;
