-- 014_model_blobs.sql: finished jobs' models in the database.
--
-- A server on SQLite owns its database and its data directory: a job's
-- model stays a file under the data directory's models/, named by
-- jobs.model_path, and this migration changes nothing.  It exists so that
-- both engines record the same schema version; the table of model blobs
-- is PostgreSQL's (schema/pg/014_model_blobs.sql).
SELECT 1;
