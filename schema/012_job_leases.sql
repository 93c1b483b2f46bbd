-- 012_job_leases.sql: who runs a job, and until when that is known.
--
-- A running job carries the instance id of the server that claimed it and
-- the time (Unix seconds, the owner's clock) until which the owner has
-- vouched for it.  The owner renews the lease while the job runs; on a
-- shared database any server fails a running job whose lease has expired,
-- by the restart rule (docs/jobs.md).  On SQLite one server owns every job
-- and the start-up rule alone applies; the columns are written all the
-- same, so a database moved to PostgreSQL keeps them meaningful.
ALTER TABLE jobs ADD COLUMN owner TEXT;
ALTER TABLE jobs ADD COLUMN lease_until INTEGER;
CREATE INDEX jobs_by_lease ON jobs (state, lease_until);
