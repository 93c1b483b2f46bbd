-- 017_job_data_link.sql (PostgreSQL): the version of the data a job was
-- checked against, as schema/017_job_data_link.sql explains.
ALTER TABLE jobs ADD COLUMN data_link TEXT COLLATE "C";
