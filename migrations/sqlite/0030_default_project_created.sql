-- The `default` project was inserted with created_at 0 (shown as
-- 1970-01-01): it dates from its first run, or from now on a database
-- without runs. The same as migrations/postgres/0019_default_project_created.sql.
UPDATE projects
SET created_at = COALESCE(
    (SELECT MIN(created_at) FROM runs),
    CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
)
WHERE name = 'default' AND created_at = 0;
