-- Status webhooks: a run's own hook, a project's subscriptions and their
-- secrets, and the durable outbox of status changes and their deliveries.
--
-- No code path can change a run's status without the change being captured:
-- the trigger below records it in `status_changes` in the same transaction,
-- for runs that have a hook or whose project has a subscription. A worker
-- fans each change out into one `webhook_deliveries` row per hook that wants
-- it (and deletes the change), then sends them, recording each attempt.

-- A run's own hook, `{"url", "statuses"}` as JSON; NULL for none.
ALTER TABLE runs ADD COLUMN on_status_change TEXT;

-- Secrets are kept as written: signing needs them (like Stripe's endpoint
-- secrets). After a rotation the previous one still signs until
-- `previous_until`, so receivers can switch over without missing a delivery.
CREATE TABLE webhook_secrets (
    project         TEXT PRIMARY KEY NOT NULL,
    secret          TEXT NOT NULL,
    previous_secret TEXT,
    previous_until  INTEGER,
    created_at      INTEGER NOT NULL,
    rotated_at      INTEGER
) WITHOUT ROWID;

CREATE TABLE webhook_subscriptions (
    id              TEXT PRIMARY KEY NOT NULL,
    project         TEXT NOT NULL,
    url             TEXT NOT NULL,
    statuses        TEXT,
    description     TEXT,
    secret          TEXT NOT NULL,
    previous_secret TEXT,
    previous_until  INTEGER,
    created_at      INTEGER NOT NULL,
    created_by_id   TEXT,
    created_by      TEXT,
    rotated_at      INTEGER
);
CREATE INDEX webhook_subscriptions_by_project ON webhook_subscriptions (project, created_at DESC, id DESC);

-- The outbox: one row per status change not fanned out yet. Large values
-- are not copied (the payload then says `truncated`).
CREATE TABLE status_changes (
    seq            INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id         TEXT NOT NULL,
    project        TEXT NOT NULL,
    old_status     TEXT NOT NULL,
    new_status     TEXT NOT NULL,
    at             INTEGER NOT NULL,
    result         TEXT,
    result_omitted INTEGER NOT NULL DEFAULT 0,
    summary        TEXT,
    failure_reason TEXT,
    interruptions  TEXT
);
CREATE INDEX status_changes_by_run ON status_changes (run_id, seq);

CREATE TRIGGER runs_status_changes AFTER UPDATE OF status ON runs
WHEN OLD.status <> NEW.status
    AND (NEW.on_status_change IS NOT NULL
         OR EXISTS (SELECT 1 FROM webhook_subscriptions WHERE project = NEW.project))
BEGIN
    INSERT INTO status_changes (run_id, project, old_status, new_status, at, result, result_omitted, summary,
        failure_reason, interruptions)
    VALUES (
        NEW.id, NEW.project, OLD.status, NEW.status,
        CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER),
        CASE WHEN length(NEW.result) <= 65536 THEN NEW.result END,
        coalesce(length(NEW.result) > 65536, 0),
        substr(NEW.summary, 1, 16384),
        substr(NEW.failure_reason, 1, 16384),
        CASE WHEN NEW.status = 'paused' THEN (
            SELECT json_group_array(json_object(
                'call_id', id, 'tool_name', tool_name, 'step_index', step_idx,
                'arguments', CASE WHEN length(arguments) <= 65536 AND json_valid(arguments) THEN json(arguments) END,
                'requested_at', requested_at))
            FROM (SELECT * FROM tool_calls WHERE run_id = NEW.id AND status = 'awaiting_approval'
                  ORDER BY step_idx, pos LIMIT 100))
        END);
END;

-- One status change on its way to one hook (`target`: `run` for the run's
-- own, else the subscription's id). A run's deliveries to one target go out
-- in `change_seq` order. `claim` and `claimed_until` are the lease of the
-- worker sending it: an expired lease (a crash mid-send) lets it be sent
-- again (at least once; `id` is the receiver's idempotency key).
CREATE TABLE webhook_deliveries (
    id              TEXT PRIMARY KEY NOT NULL,
    run_id          TEXT NOT NULL,
    project         TEXT NOT NULL,
    subscription_id TEXT,
    target          TEXT NOT NULL,
    change_seq      INTEGER NOT NULL,
    url             TEXT NOT NULL,
    old_status      TEXT NOT NULL,
    new_status      TEXT NOT NULL,
    changed_at      INTEGER NOT NULL,
    payload         TEXT NOT NULL,
    state           TEXT NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER,
    claim           TEXT,
    claimed_until   INTEGER NOT NULL DEFAULT 0,
    created_at      INTEGER NOT NULL,
    finished_at     INTEGER,
    failure         TEXT
);
CREATE INDEX webhook_deliveries_by_run ON webhook_deliveries (run_id, change_seq DESC, id);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_in_order ON webhook_deliveries (run_id, target, change_seq) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_pending_by_project ON webhook_deliveries (project) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_by_subscription ON webhook_deliveries (subscription_id) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_finished ON webhook_deliveries (finished_at) WHERE state <> 'pending';

CREATE TABLE webhook_attempts (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    delivery_id TEXT NOT NULL,
    at          INTEGER NOT NULL,
    status_code INTEGER,
    latency_ms  INTEGER NOT NULL,
    error       TEXT
);
CREATE INDEX webhook_attempts_by_delivery ON webhook_attempts (delivery_id, id DESC);
