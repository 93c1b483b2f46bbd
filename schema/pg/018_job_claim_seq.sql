-- 018_job_claim_seq.sql (PostgreSQL): which claim of its server started a
-- job, as schema/018_job_claim_seq.sql explains.
ALTER TABLE jobs ADD COLUMN claim_seq BIGINT;
