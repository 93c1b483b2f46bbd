-- 004_pate.sql: PATE aggregation sessions (server/srv_pate_session.c).
--
-- A session belongs to one dataset and fixes the aggregator and its noise.
-- Every batch of label queries is one ledger charge; the session's row and
-- its answer rows are written in the same transaction as that charge.

CREATE TABLE pate_sessions (
  id              TEXT PRIMARY KEY,
  dataset_id      TEXT NOT NULL REFERENCES datasets(id),
  -- The creation request, normalised (aggregator, teachers, classes, noise,
  -- threshold, orders ...): immutable.
  config          TEXT NOT NULL,
  queries         INTEGER NOT NULL DEFAULT 0 CHECK (queries >= 0),
  checks          INTEGER NOT NULL DEFAULT 0 CHECK (checks >= 0),
  teacher_answers INTEGER NOT NULL DEFAULT 0 CHECK (teacher_answers >= 0),
  student_answers INTEGER NOT NULL DEFAULT 0 CHECK (student_answers >= 0),
  abstained       INTEGER NOT NULL DEFAULT 0 CHECK (abstained >= 0),
  releases        INTEGER NOT NULL DEFAULT 0 CHECK (releases >= 0),
  -- SENSITIVE: the data-dependent RDP at the session's orders (JSON array),
  -- a function of the private votes.  Never shown; published only through
  -- the smooth-sensitivity release, which is charged.
  dd_rdp          TEXT NOT NULL,
  actor           TEXT NOT NULL,
  created_at      TEXT NOT NULL,
  updated_at      TEXT NOT NULL
) STRICT;
CREATE INDEX pate_sessions_by_dataset ON pate_sessions (dataset_id, created_at);

-- SENSITIVE: the vote histogram of every query the teachers answered
-- (native int32 counts), kept for the smooth sensitivity of the release.
CREATE TABLE pate_answers (
  id          INTEGER PRIMARY KEY,
  session_id  TEXT NOT NULL REFERENCES pate_sessions(id),
  charge_seq  INTEGER NOT NULL REFERENCES ledger(seq),
  votes       BLOB NOT NULL
) STRICT;
CREATE INDEX pate_answers_by_session ON pate_answers (session_id, id);
