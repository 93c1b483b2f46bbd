-- 006_ledger_totals.sql: every ledger row carries its dataset's running
-- totals, and the dataset row no longer does.
--
-- Until now a charge wrote three pages in its fsync'ed commit: the ledger
-- row, its index entry, and the dataset row whose running totals (spent,
-- reserved, open reservations, charges) it rewrote.  Each ledger row now
-- holds those totals as they stand after it, so a charge writes the ledger
-- row and its index entry only, and the dataset's totals are the ones its
-- last row carries (one seek down ledger_by_dataset, at any ledger size).
-- The totals are written by the same INSERT that appends the row, so the
-- row and the totals can never disagree; `dpgate verify` replays every row
-- and checks each row's totals against the replay up to that row.
--
-- Rows written before this migration carry no totals (NULL), except each
-- dataset's last row, which takes the dataset row's totals: those were the
-- totals after that row, because every transaction that appended rows
-- rewrote them before it committed.  A dataset with no ledger row has spent
-- nothing; its totals are zero.  A dataset row that claims charges or open
-- reservations without any ledger row would lose them here, so such a
-- database is refused: the CHECK below fails, and with it the migration,
-- which leaves the file as it was.
--
-- The dataset table is then rebuilt without the four total columns, so that
-- nothing can read a stale copy of them.  The runner (server/srv_store.c,
-- migrate) turns foreign keys off for the rebuild and runs PRAGMA
-- foreign_key_check before it commits.

CREATE TEMP TABLE m006_orphaned_totals (
  datasets INTEGER NOT NULL
    CONSTRAINT a_dataset_counts_charges_or_reservations_without_ledger_rows CHECK (datasets = 0)
);
INSERT INTO m006_orphaned_totals
  SELECT count(*) FROM datasets d
   WHERE (d.charges > 0 OR d.open_reservations > 0)
     AND NOT EXISTS (SELECT 1 FROM ledger l WHERE l.dataset_id = d.id);
DROP TABLE m006_orphaned_totals;

ALTER TABLE ledger ADD COLUMN spent TEXT;
ALTER TABLE ledger ADD COLUMN reserved TEXT;
ALTER TABLE ledger ADD COLUMN open_reservations INTEGER;
ALTER TABLE ledger ADD COLUMN charges INTEGER;

UPDATE ledger
   SET (spent, reserved, open_reservations, charges) =
       (SELECT d.spent, d.reserved, d.open_reservations, d.charges
          FROM datasets d WHERE d.id = ledger.dataset_id)
 WHERE seq IN (SELECT max(seq) FROM ledger GROUP BY dataset_id);

CREATE TABLE datasets_new (
  id                TEXT PRIMARY KEY,
  name              TEXT NOT NULL,
  privacy_unit      TEXT NOT NULL,
  neighbor          TEXT NOT NULL CHECK (neighbor IN ('add_remove', 'replace')),
  accountant        TEXT NOT NULL CHECK (accountant IN ('basic', 'rdp', 'zcdp')),
  budget_epsilon    REAL NOT NULL CHECK (budget_epsilon > 0),
  budget_delta      REAL NOT NULL CHECK (budget_delta >= 0 AND budget_delta < 1),
  archived          INTEGER NOT NULL DEFAULT 0 CHECK (archived IN (0, 1)),
  created_at        TEXT NOT NULL,
  -- When the row itself last changed (name, budget, archive); a dataset's
  -- updated_at as the API reports it is the later of this and its last
  -- ledger row's created_at.
  updated_at        TEXT NOT NULL
) STRICT;
INSERT INTO datasets_new (id, name, privacy_unit, neighbor, accountant, budget_epsilon,
                          budget_delta, archived, created_at, updated_at)
  SELECT id, name, privacy_unit, neighbor, accountant, budget_epsilon, budget_delta, archived,
         created_at, updated_at FROM datasets;
DROP TABLE datasets;
ALTER TABLE datasets_new RENAME TO datasets;
