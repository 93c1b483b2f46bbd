-- 005_plain_checks.sql (PostgreSQL): the ledger's and reservations' value
-- lists written as comparisons, as schema/005 writes them for SQLite (where
-- the list form cost a temporary b-tree per row); the accepted values are
-- unchanged.  PostgreSQL alters a check in place: no rebuild.

ALTER TABLE ledger DROP CONSTRAINT ledger_kind_check,
  ADD CONSTRAINT ledger_kind_check
    CHECK (kind = 'charge' OR kind = 'reserve' OR kind = 'commit'
           OR kind = 'release' OR kind = 'budget' OR kind = 'archive');

ALTER TABLE reservations DROP CONSTRAINT reservations_state_check,
  ADD CONSTRAINT reservations_state_check
    CHECK (state = 'open' OR state = 'committed' OR state = 'released');
