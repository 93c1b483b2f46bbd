-- 016_reservation_pages.sql: a dataset's reservations listed a page at a time.
--
-- GET /v1/datasets/{id}/reservations pages by the seq of each
-- reservation's "reserve" ledger row, as the ledger pages by seq; this
-- index finds those rows without walking the dataset's charges.
CREATE INDEX ledger_reserve_rows ON ledger (dataset_id, seq) WHERE kind = 'reserve';
