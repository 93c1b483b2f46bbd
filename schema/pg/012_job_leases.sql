-- 012_job_leases.sql (PostgreSQL): job owners and leases, as
-- schema/012_job_leases.sql explains.
ALTER TABLE jobs ADD COLUMN owner TEXT COLLATE "C";
ALTER TABLE jobs ADD COLUMN lease_until BIGINT;
CREATE INDEX jobs_by_lease ON jobs (state, lease_until);
