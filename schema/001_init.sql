-- 001_init.sql: datasets, the ledger, reservations, idempotency and keys.
-- Applied once, inside one transaction, by the migration runner in
-- server/srv_store.c, which records the version in schema_migrations.

CREATE TABLE datasets (
  id                TEXT PRIMARY KEY,
  name              TEXT NOT NULL,
  privacy_unit      TEXT NOT NULL,
  neighbor          TEXT NOT NULL CHECK (neighbor IN ('add_remove', 'replace')),
  accountant        TEXT NOT NULL CHECK (accountant IN ('basic', 'rdp', 'zcdp')),
  budget_epsilon    REAL NOT NULL CHECK (budget_epsilon > 0),
  budget_delta      REAL NOT NULL CHECK (budget_delta >= 0 AND budget_delta < 1),
  -- Running compositions in the ledger accountant's coordinates (JSON arrays
  -- of doubles printed with 17 significant digits), kept in step with the
  -- ledger rows inside every transaction that writes them.
  spent             TEXT NOT NULL,
  reserved          TEXT NOT NULL,
  open_reservations INTEGER NOT NULL DEFAULT 0 CHECK (open_reservations >= 0),
  charges           INTEGER NOT NULL DEFAULT 0 CHECK (charges >= 0),
  archived          INTEGER NOT NULL DEFAULT 0 CHECK (archived IN (0, 1)),
  created_at        TEXT NOT NULL,
  updated_at        TEXT NOT NULL
) STRICT;

-- Every change to a dataset's privacy state is a row here, in order.
--   charge   a direct charge: cost added to spent
--   reserve  a reservation opened: cost added to reserved
--   commit   a reservation committed: cost moved from reserved to spent
--   release  a reservation released: cost returned from reserved
--   budget   the budget changed (raised or lowered), with who did it
--   archive  the dataset was archived
CREATE TABLE ledger (
  seq             INTEGER PRIMARY KEY AUTOINCREMENT,
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
CREATE INDEX ledger_by_dataset ON ledger (dataset_id, seq);

CREATE TABLE reservations (
  id          TEXT PRIMARY KEY,
  dataset_id  TEXT NOT NULL REFERENCES datasets(id),
  event       TEXT NOT NULL,
  cost        TEXT NOT NULL,
  epsilon     REAL NOT NULL,
  state       TEXT NOT NULL CHECK (state IN ('open', 'committed', 'released')),
  actor       TEXT NOT NULL,
  note        TEXT,
  created_at  TEXT NOT NULL,
  expires_at  INTEGER NOT NULL,
  closed_at   TEXT,
  closed_by   TEXT
) STRICT;
CREATE INDEX reservations_open ON reservations (dataset_id, state, expires_at);

-- Stored answers to POSTs that spend budget, replayed byte for byte.
CREATE TABLE idempotency (
  actor         TEXT NOT NULL,
  key           TEXT NOT NULL,
  request_hash  BLOB NOT NULL,
  status        INTEGER NOT NULL,
  body          BLOB NOT NULL,
  created_at    TEXT NOT NULL,
  PRIMARY KEY (actor, key)
) STRICT;

CREATE TABLE api_keys (
  id          TEXT PRIMARY KEY,
  hash        BLOB NOT NULL,
  role        TEXT NOT NULL CHECK (role IN ('admin', 'analyst', 'viewer')),
  datasets    TEXT NOT NULL DEFAULT '[]',
  note        TEXT,
  created_at  TEXT NOT NULL,
  revoked_at  TEXT
) STRICT;
