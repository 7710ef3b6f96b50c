-- A version per OTLP trace, bumped by every ingest of it: a server keeps a
-- trace's assembled run between requests and folds new spans into it only
-- while it holds the version stored here (another server may have ingested
-- since); else it reads the trace's spans again (see engine/src/otel/ingest/).
-- The same table as migrations/sqlite/0024_otlp_traces.sql.
CREATE TABLE otlp_traces (
    project  TEXT NOT NULL,
    trace_id TEXT NOT NULL,
    version  BIGINT NOT NULL,
    PRIMARY KEY (project, trace_id)
);
