-- 002_jobs.sql: the data linked to a dataset, and training jobs.

-- What a dataset's trainers and queries read.  Raw rows are never served.
--   builtin  a public-format file set installed by a Debian package
--            (builtin = 'fashion-mnist'); rows = its training split's size
--   table    a CSV table uploaded by an admin, stored under the data dir
CREATE TABLE dataset_data (
  dataset_id  TEXT PRIMARY KEY REFERENCES datasets(id),
  kind        TEXT NOT NULL CHECK (kind IN ('builtin', 'table')),
  builtin     TEXT,
  path        TEXT,
  rows        INTEGER NOT NULL CHECK (rows >= 0),
  columns     TEXT NOT NULL DEFAULT '[]',
  bytes       INTEGER NOT NULL DEFAULT 0,
  actor       TEXT NOT NULL,
  created_at  TEXT NOT NULL
) STRICT;

-- A training job.  Its event is fixed from its parameters before any data is
-- read, and reserved in full; the reservation is committed when the job ends
-- once it has started (whatever the outcome), released if it is cancelled
-- while still queued.
CREATE TABLE jobs (
  id              TEXT PRIMARY KEY,
  dataset_id      TEXT NOT NULL REFERENCES datasets(id),
  trainer         TEXT NOT NULL,
  params          TEXT NOT NULL,
  event           TEXT NOT NULL,
  n_train         INTEGER NOT NULL,
  reservation_id  TEXT NOT NULL REFERENCES reservations(id),
  state           TEXT NOT NULL CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
  progress        TEXT,
  result          TEXT,
  error           TEXT,
  model_path      TEXT,
  actor           TEXT NOT NULL,
  note            TEXT,
  created_at      TEXT NOT NULL,
  started_at      TEXT,
  finished_at     TEXT
) STRICT;
CREATE INDEX jobs_by_dataset ON jobs (dataset_id, created_at);
CREATE INDEX jobs_by_state ON jobs (state, created_at);
