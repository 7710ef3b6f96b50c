-- The `default` project was inserted with created_at 0 (shown as
-- 1970-01-01): it dates from its first run, or from now on a database
-- without runs. The same as migrations/sqlite/0030_default_project_created.sql.
UPDATE projects
SET created_at = COALESCE(
    (SELECT MIN(created_at) FROM runs),
    (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT
)
WHERE name = 'default' AND created_at = 0;
