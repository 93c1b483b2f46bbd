-- 006_ledger_totals.sql (PostgreSQL): every ledger row carries its
-- dataset's running totals, and the dataset row no longer does, as
-- schema/006_ledger_totals.sql explains.  Rows written before carry NULL,
-- except each dataset's last, which takes the dataset row's totals; a
-- dataset that claims charges or open reservations without any ledger row
-- fails the migration, which leaves the database as it was.

DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM datasets d
              WHERE (d.charges > 0 OR d.open_reservations > 0)
                AND NOT EXISTS (SELECT 1 FROM ledger l WHERE l.dataset_id = d.id)) THEN
    RAISE EXCEPTION 'a dataset counts charges or reservations without ledger rows';
  END IF;
END
$$;

ALTER TABLE ledger
  ADD COLUMN spent TEXT COLLATE "C",
  ADD COLUMN reserved TEXT COLLATE "C",
  ADD COLUMN open_reservations BIGINT,
  ADD COLUMN charges BIGINT;

UPDATE ledger
   SET (spent, reserved, open_reservations, charges) =
       (SELECT d.spent, d.reserved, d.open_reservations, d.charges
          FROM datasets d WHERE d.id = ledger.dataset_id)
 WHERE seq IN (SELECT max(seq) FROM ledger GROUP BY dataset_id);

ALTER TABLE datasets
  DROP COLUMN spent,
  DROP COLUMN reserved,
  DROP COLUMN open_reservations,
  DROP COLUMN charges;
