-- 010_public_datasets.sql (PostgreSQL): datasets whose rows are public, as
-- schema/010_public_datasets.sql: no budget, no ledger, every spend refused.
ALTER TABLE datasets ADD COLUMN public BIGINT NOT NULL DEFAULT 0
  CHECK (public IN (0, 1));
