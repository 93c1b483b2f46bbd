-- 007_table_disclosure.sql: what a dataset's table metadata may show.
--
-- Under add/remove neighbours a table's row count depends on the private
-- rows, and so do column kinds inferred from the values (one empty cell
-- turns a numeric column categorical).  The uploading admin now says what
-- is public: rows_public = 1 when the upload declared its row count public
-- (row_count=public), schema_declared = 1 when it declared its columns'
-- kinds (columns=...).  Readers other than admins see the row count and the
-- schema only when they were declared.  Links made before this migration
-- declared neither, except the builtin data set, a published file set whose
-- size and shape are public.
ALTER TABLE dataset_data ADD COLUMN rows_public INTEGER NOT NULL DEFAULT 0
  CHECK (rows_public IN (0, 1));
ALTER TABLE dataset_data ADD COLUMN schema_declared INTEGER NOT NULL DEFAULT 0
  CHECK (schema_declared IN (0, 1));
UPDATE dataset_data SET rows_public = 1, schema_declared = 1 WHERE kind = 'builtin';
