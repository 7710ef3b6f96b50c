-- Sign-in attempts per account and per client address (`account:NAME`,
-- `address:IP`), counted in the database rather than in each server's
-- memory: one statement takes an attempt only under the limit, so
-- concurrent attempts cannot all slip through, and servers sharing a
-- database share one budget. A row is forgotten once its window has passed.
-- The same table as migrations/sqlite/0021_sign_in_attempts.sql.

CREATE TABLE sign_in_attempts (
    subject      TEXT PRIMARY KEY,
    attempts     BIGINT NOT NULL,
    window_start BIGINT NOT NULL
);
CREATE INDEX sign_in_attempts_by_window ON sign_in_attempts (window_start);
