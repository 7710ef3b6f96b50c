-- A version per OTLP trace, bumped by every ingest of it: a server keeps a
-- trace's assembled run between requests and folds new spans into it only
-- while it holds the version stored here (another server may have ingested
-- since); else it reads the trace's spans again (see engine/src/otel/ingest/).
CREATE TABLE otlp_traces (
    project  TEXT NOT NULL,
    trace_id TEXT NOT NULL,
    version  INTEGER NOT NULL,
    PRIMARY KEY (project, trace_id)
) WITHOUT ROWID;
