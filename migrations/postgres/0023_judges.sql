-- A judge's score (an LLM as judge, see `model::scorer::judge`) keeps the
-- label the judge chose and the judge's own run, where its prompt and
-- reasoning are. The same columns as migrations/sqlite/0034_judges.sql.
ALTER TABLE scores ADD COLUMN label TEXT;
ALTER TABLE scores ADD COLUMN judge_run_id TEXT;
