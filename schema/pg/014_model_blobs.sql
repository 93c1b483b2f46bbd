-- 014_model_blobs.sql (PostgreSQL): a finished job's model bytes, stored
-- beside its row so that any server sharing the database can serve them.
--
-- One row per job: the serialized model, under the name its row
-- (jobs.model_path, "db:models/<job>.dpgm") gives it.  The worker writes
-- the row before the job's finish transaction names it, so no server sees
-- a model_path without its bytes; a reader asks for the blob by the name
-- the row read.  SQLite keeps files (schema/014_model_blobs.sql).
CREATE TABLE model_blobs (
  job_id  TEXT COLLATE "C" PRIMARY KEY REFERENCES jobs(id),
  path    TEXT COLLATE "C" NOT NULL,
  model   BYTEA NOT NULL
);
