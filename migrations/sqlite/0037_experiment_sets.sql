-- Experiments of several models: one experiment per model over the same
-- dataset version and settings, sharing `set_id` (null for an experiment
-- started alone). The same change as migrations/postgres/0026_experiment_sets.sql.
ALTER TABLE experiments ADD COLUMN set_id TEXT;
CREATE INDEX experiments_by_set ON experiments (project, set_id) WHERE set_id IS NOT NULL;
