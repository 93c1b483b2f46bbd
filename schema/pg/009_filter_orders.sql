-- 009_filter_orders.sql (PostgreSQL): an rdp dataset's own filter orders,
-- as schema/009_filter_orders.sql (NULL: the default orders).
ALTER TABLE datasets ADD COLUMN filter_orders TEXT COLLATE "C";
