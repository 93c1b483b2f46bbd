-- 003_ledger_rowid.sql: ledger.seq as a plain INTEGER PRIMARY KEY.
--
-- AUTOINCREMENT made every charge also update sqlite_sequence, one more page
-- in each fsync'ed commit.  Ledger rows are never deleted, so the rowid
-- alone already numbers them in order and never reuses a number.
PRAGMA defer_foreign_keys = ON;

CREATE TABLE ledger_new (
  seq             INTEGER PRIMARY KEY,
  dataset_id      TEXT NOT NULL REFERENCES datasets(id),
  kind            TEXT NOT NULL CHECK (kind IN ('charge', 'reserve', 'commit', 'release', 'budget', 'archive')),
  event           TEXT,
  cost            TEXT,
  epsilon         REAL,
  delta           REAL,
  reservation_id  TEXT,
  note            TEXT,
  actor           TEXT NOT NULL,
  idempotency_key TEXT,
  created_at      TEXT NOT NULL
) STRICT;
INSERT INTO ledger_new SELECT seq, dataset_id, kind, event, cost, epsilon, delta, reservation_id,
  note, actor, idempotency_key, created_at FROM ledger ORDER BY seq;
DROP TABLE ledger;
ALTER TABLE ledger_new RENAME TO ledger;
CREATE INDEX ledger_by_dataset ON ledger (dataset_id, seq);
