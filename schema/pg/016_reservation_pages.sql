-- 016_reservation_pages.sql (PostgreSQL): a dataset's reservations listed a
-- page at a time, as schema/016_reservation_pages.sql explains.
CREATE INDEX ledger_reserve_rows ON ledger (dataset_id, seq) WHERE kind = 'reserve';
