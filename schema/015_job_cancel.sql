-- 015_job_cancel.sql: a cancel asked for through any server.
--
-- A running job is stopped by the worker of the server that claimed it.
-- The cancel route sets cancel_requested on the row as well as telling
-- its own server's workers; on a shared database the owner's lease thread
-- reads the flag of its running jobs at each renewal and stops them, so a
-- cancel sent to another server happens too.  On SQLite the one server's
-- workers are told directly; the flag is written all the same.
ALTER TABLE jobs ADD COLUMN cancel_requested INTEGER NOT NULL DEFAULT 0
    CHECK (cancel_requested IN (0, 1));
