-- 013_table_blobs.sql (PostgreSQL): a hosted table's bytes, stored beside
-- its link so that any server sharing the database can serve any table.
--
-- One row per dataset: the CSV exactly as uploaded, under the name its
-- link (dataset_data.path, "db:tables/<dataset>.<hex>.csv") gives it.  An
-- upload writes the row and the link in one transaction; the name is new
-- for every upload, and a reader asks for the blob by the name its link
-- read, so it never gets another upload's bytes.  SQLite keeps files
-- (schema/013_table_blobs.sql).
CREATE TABLE table_blobs (
  dataset_id  TEXT COLLATE "C" PRIMARY KEY REFERENCES datasets(id),
  path        TEXT COLLATE "C" NOT NULL,
  csv         BYTEA NOT NULL
);
