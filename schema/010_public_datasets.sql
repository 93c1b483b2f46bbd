-- 010_public_datasets.sql: datasets whose rows are public.
--
-- A public dataset (public = 1) holds a table anyone with access may read
-- back: auxiliary inputs and test rows for trainers.  It protects nothing,
-- so it has no budget and no ledger: no ledger row is ever written for it
-- and every spend on it is refused (store_db.c, spend_in_txn).  Its
-- budget columns, which the table's checks require, hold the placeholder
-- the store writes (the smallest positive double, delta 0, a basic
-- ledger), a budget that admits no charge should a check ever be missed.
-- The flag is fixed at creation: no statement updates it.
ALTER TABLE datasets ADD COLUMN public INTEGER NOT NULL DEFAULT 0
  CHECK (public IN (0, 1));
