-- 002_jobs.sql (PostgreSQL): the data linked to a dataset, and training
-- jobs, as schema/002_jobs.sql.

CREATE TABLE dataset_data (
  dataset_id  TEXT COLLATE "C" PRIMARY KEY REFERENCES datasets(id),
  kind        TEXT COLLATE "C" NOT NULL CHECK (kind IN ('builtin', 'table')),
  builtin     TEXT COLLATE "C",
  path        TEXT COLLATE "C",
  rows        BIGINT NOT NULL CHECK (rows >= 0),
  columns     TEXT COLLATE "C" NOT NULL DEFAULT '[]',
  bytes       BIGINT NOT NULL DEFAULT 0,
  actor       TEXT COLLATE "C" NOT NULL,
  created_at  TEXT COLLATE "C" NOT NULL
);

CREATE TABLE jobs (
  id              TEXT COLLATE "C" PRIMARY KEY,
  dataset_id      TEXT COLLATE "C" NOT NULL REFERENCES datasets(id),
  trainer         TEXT COLLATE "C" NOT NULL,
  params          TEXT COLLATE "C" NOT NULL,
  event           TEXT COLLATE "C" NOT NULL,
  n_train         BIGINT NOT NULL,
  reservation_id  TEXT COLLATE "C" NOT NULL REFERENCES reservations(id),
  state           TEXT COLLATE "C" NOT NULL CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
  progress        TEXT COLLATE "C",
  result          TEXT COLLATE "C",
  error           TEXT COLLATE "C",
  model_path      TEXT COLLATE "C",
  actor           TEXT COLLATE "C" NOT NULL,
  note            TEXT COLLATE "C",
  created_at      TEXT COLLATE "C" NOT NULL,
  started_at      TEXT COLLATE "C",
  finished_at     TEXT COLLATE "C"
);
CREATE INDEX jobs_by_dataset ON jobs (dataset_id, created_at);
CREATE INDEX jobs_by_state ON jobs (state, created_at);
