-- A judge's score (an LLM as judge, see `model::scorer::judge`) keeps the
-- label the judge chose and the judge's own run, where its prompt and
-- reasoning are. The same columns as migrations/postgres/0023_judges.sql.
ALTER TABLE scores ADD COLUMN label TEXT;
ALTER TABLE scores ADD COLUMN judge_run_id TEXT;
