-- 009_filter_orders.sql: an rdp dataset's own filter orders.
--
-- The RDP orders of the dataset's filter (acct_filter_init_orders), chosen
-- at creation and fixed from then on, as a JSON array of numbers; NULL
-- means the default orders (accountant/acct_renyi_filter.c).  The budget's
-- delta is split over them, so a dataset that names fewer pays less of it.
ALTER TABLE datasets ADD COLUMN filter_orders TEXT;
