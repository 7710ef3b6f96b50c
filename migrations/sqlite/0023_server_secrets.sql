-- Secrets made once per database and shared by every server on it: the
-- key child run ids are derived with (so they cannot be guessed from what
-- a client sent). Never shown through the API.

CREATE TABLE server_secrets (
    name  TEXT PRIMARY KEY NOT NULL,
    value TEXT NOT NULL
) WITHOUT ROWID;
