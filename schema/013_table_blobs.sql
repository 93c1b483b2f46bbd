-- 013_table_blobs.sql: hosted tables' bytes in the database.
--
-- A server on SQLite owns its database and its data directory: a hosted
-- table stays a file under the data directory's tables/, linked from
-- dataset_data.path, and this migration changes nothing.  It exists so
-- that both engines record the same schema version; the table of blobs is
-- PostgreSQL's (schema/pg/013_table_blobs.sql), where several servers
-- share one database and none shares another's data directory.
SELECT 1;
