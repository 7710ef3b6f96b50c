-- Several servers on one database: each run is driven by one server at a
-- time, holding a lease (owner, expiry) with an attempt number that fences
-- every write of the run's loop (a server that lost the lease cannot write).
ALTER TABLE runs ADD COLUMN lease_owner TEXT;
ALTER TABLE runs ADD COLUMN lease_until BIGINT;
ALTER TABLE runs ADD COLUMN attempt BIGINT NOT NULL DEFAULT 0;
-- A run that waits for its child runs is not driven until one of them ends
-- (the server whose child ended claims it), so the queue skips it.
ALTER TABLE runs ADD COLUMN parked BOOLEAN NOT NULL DEFAULT FALSE;
-- Another server wanted to drive the run while it was held (a child ended,
-- a decision came): the holder looks at the run again when it lets go.
ALTER TABLE runs ADD COLUMN rewake BOOLEAN NOT NULL DEFAULT FALSE;

-- A run made ready to drive (created, resumed, reopened) is the business of
-- the server that did it until it has stored that change's events and either
-- claimed the run or handed it to the queue (milliseconds; should it die,
-- for 2 s): so no other server drives it ahead of those events.
ALTER TABLE runs ADD COLUMN handoff_until BIGINT;
-- The server whose driver finished the run: it publishes the run's
-- `run.finished`; should it die first, another server does.
ALTER TABLE runs ADD COLUMN finished_by TEXT;

CREATE FUNCTION runs_handoff() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.status IN ('pending', 'running')
       AND (TG_OP = 'INSERT' OR OLD.status NOT IN ('pending', 'running')) THEN
        NEW.handoff_until := (extract(epoch FROM clock_timestamp()) * 1000)::bigint + 2000;
    END IF;
    RETURN NEW;
END;
$$;
CREATE TRIGGER runs_handoff BEFORE INSERT OR UPDATE OF status ON runs
FOR EACH ROW EXECUTE FUNCTION runs_handoff();

-- The queue of work: runs to drive that nobody holds, oldest first, and
-- runs whose holder stopped renewing.
CREATE INDEX runs_unclaimed ON runs (created_at, id)
    WHERE status IN ('pending', 'running') AND lease_owner IS NULL AND NOT parked;
CREATE INDEX runs_leased ON runs (lease_owner, lease_until) WHERE lease_owner IS NOT NULL;

-- The servers sharing the database, each renewing its row (heartbeat).
CREATE TABLE servers (
    id           TEXT PRIMARY KEY,
    address      TEXT NOT NULL,
    version      TEXT NOT NULL,
    started_at   BIGINT NOT NULL,
    heartbeat_at BIGINT NOT NULL,
    runs_held    BIGINT NOT NULL DEFAULT 0,
    max_runs     BIGINT NOT NULL DEFAULT 0
);
