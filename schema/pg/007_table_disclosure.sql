-- 007_table_disclosure.sql (PostgreSQL): what a dataset's table metadata
-- may show, as schema/007_table_disclosure.sql.
ALTER TABLE dataset_data ADD COLUMN rows_public BIGINT NOT NULL DEFAULT 0
  CHECK (rows_public IN (0, 1));
ALTER TABLE dataset_data ADD COLUMN schema_declared BIGINT NOT NULL DEFAULT 0
  CHECK (schema_declared IN (0, 1));
UPDATE dataset_data SET rows_public = 1, schema_declared = 1 WHERE kind = 'builtin';
