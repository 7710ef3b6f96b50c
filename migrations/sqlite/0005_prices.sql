-- Issue 5: prices per model, USD per million tokens, edited in the settings
-- page (`PUT /api/prices/{model}`). Cost is computed on read from usage (see
-- engine/src/cost.rs), so changing a price re-prices past runs too.
CREATE TABLE model_prices (
    model       TEXT PRIMARY KEY NOT NULL,
    input       REAL NOT NULL,
    output      REAL NOT NULL,
    cache_read  REAL NOT NULL,
    cache_write REAL NOT NULL,
    reasoning   REAL NOT NULL,
    updated_at  INTEGER NOT NULL
);

-- The built-in model is free.
INSERT INTO model_prices (model, input, output, cache_read, cache_write, reasoning, updated_at)
VALUES ('builtin', 0, 0, 0, 0, 0, 0);
