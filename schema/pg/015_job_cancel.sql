-- 015_job_cancel.sql (PostgreSQL): a cancel asked for through any server,
-- as schema/015_job_cancel.sql explains.
ALTER TABLE jobs ADD COLUMN cancel_requested INTEGER NOT NULL DEFAULT 0
    CHECK (cancel_requested IN (0, 1));
