-- Sign-in attempts per account and per client address (`account:NAME`,
-- `address:IP`), counted in the database rather than in each server's
-- memory: one statement takes an attempt only under the limit, so
-- concurrent attempts cannot all slip through, and servers sharing a
-- database share one budget. A row is forgotten once its window has passed.

CREATE TABLE sign_in_attempts (
    subject      TEXT PRIMARY KEY NOT NULL,
    attempts     INTEGER NOT NULL,
    window_start INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX sign_in_attempts_by_window ON sign_in_attempts (window_start);
