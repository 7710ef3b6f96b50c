-- Secrets made once per database and shared by every server on it: the
-- key child run ids are derived with (so they cannot be guessed from what
-- a client sent). Never shown through the API.
-- The same table as migrations/sqlite/0023_server_secrets.sql.

CREATE TABLE server_secrets (
    name  TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
