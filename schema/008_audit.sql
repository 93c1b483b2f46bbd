-- 008_audit.sql: the audit trail of datasets, budgets and keys.
--
-- The ledger gains a 'create' row, written with the dataset: its initial
-- budget (epsilon, delta) and who made it (actor).  A 'budget' row now also
-- records the budget it replaced (previous_epsilon, previous_delta).  With
-- both, the budget in force at every ledger row, and the largest budget a
-- dataset ever had, follow from the ledger alone; `dpgate verify` replays
-- them and checks every admission against the budget of its moment.
--
-- Existing datasets get a 'create' row marked note = 'synthesized' (actor
-- 'migration', created_at the dataset's own).  Its budget is the dataset's
-- current one when no 'budget' row exists; otherwise the initial budget was
-- never recorded and the row leaves it NULL (unknown).  Rows only append, so
-- this row comes after the dataset's others: it carries the totals of the
-- dataset's last row (zero, in the dataset's coordinates, when it has none),
-- and the dataset's totals stay what they were.
--
-- Key creations and revocations are rows of key_events, with who did it: an
-- admin key's id (HTTP) or "cli:<user>" (`dpgate keys`).  Existing keys get
-- synthesized rows from their created_at and revoked_at, actor 'unknown'.
--
-- The ledger is rebuilt for its kind check (the runner turns foreign keys
-- off for the rebuild and runs PRAGMA foreign_key_check before it commits);
-- seq is kept, so pate_answers' references stay.

CREATE TABLE ledger_new (
  seq               INTEGER PRIMARY KEY,
  dataset_id        TEXT NOT NULL REFERENCES datasets(id),
  kind              TEXT NOT NULL CHECK (kind = 'charge' OR kind = 'reserve' OR kind = 'commit'
                                         OR kind = 'release' OR kind = 'budget' OR kind = 'archive'
                                         OR kind = 'create'),
  event             TEXT,
  cost              TEXT,
  epsilon           REAL,
  delta             REAL,
  reservation_id    TEXT,
  note              TEXT,
  actor             TEXT NOT NULL,
  idempotency_key   TEXT,
  created_at        TEXT NOT NULL,
  spent             TEXT,
  reserved          TEXT,
  open_reservations INTEGER,
  charges           INTEGER,
  previous_epsilon  REAL,
  previous_delta    REAL
) STRICT;
INSERT INTO ledger_new (seq, dataset_id, kind, event, cost, epsilon, delta, reservation_id, note,
                        actor, idempotency_key, created_at, spent, reserved, open_reservations,
                        charges)
  SELECT seq, dataset_id, kind, event, cost, epsilon, delta, reservation_id, note, actor,
         idempotency_key, created_at, spent, reserved, open_reservations, charges
    FROM ledger ORDER BY seq;
DROP TABLE ledger;
ALTER TABLE ledger_new RENAME TO ledger;
CREATE INDEX ledger_by_dataset ON ledger (dataset_id, seq);

-- The synthesized creation rows, computed before any is appended.  Zero
-- totals have the dimension of the dataset's ledger: basic (epsilon,
-- delta), zcdp (rho), rdp (one per default filter order, 20).
CREATE TEMP TABLE m008_created AS
  SELECT d.id AS dataset_id,
         CASE WHEN b.n = 0 THEN d.budget_epsilon END AS epsilon,
         CASE WHEN b.n = 0 THEN d.budget_delta END AS delta,
         d.created_at AS created_at,
         coalesce(l.spent, z.zero) AS spent,
         coalesce(l.reserved, z.zero) AS reserved,
         coalesce(l.open_reservations, 0) AS open_reservations,
         coalesce(l.charges, 0) AS charges
    FROM datasets d
    JOIN (SELECT d2.id AS id,
                 (SELECT count(*) FROM ledger WHERE dataset_id = d2.id AND kind = 'budget') AS n
            FROM datasets d2) b ON b.id = d.id
    JOIN (SELECT 'basic' AS accountant, '[0.0,0.0]' AS zero
          UNION ALL SELECT 'zcdp', '[0.0]'
          UNION ALL SELECT 'rdp', '[0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,'
                                  || '0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0]') z
      ON z.accountant = d.accountant
    LEFT JOIN ledger l
      ON l.seq = (SELECT max(seq) FROM ledger WHERE dataset_id = d.id);
INSERT INTO ledger (dataset_id, kind, epsilon, delta, note, actor, created_at, spent, reserved,
                    open_reservations, charges)
  SELECT dataset_id, 'create', epsilon, delta, 'synthesized', 'migration', created_at, spent,
         reserved, open_reservations, charges
    FROM m008_created ORDER BY dataset_id;
DROP TABLE m008_created;

CREATE TABLE key_events (
  seq          INTEGER PRIMARY KEY,
  key_id       TEXT NOT NULL REFERENCES api_keys(id),
  action       TEXT NOT NULL CHECK (action = 'create' OR action = 'revoke'),
  role         TEXT NOT NULL,
  datasets     TEXT NOT NULL,
  actor        TEXT NOT NULL,
  synthesized  INTEGER NOT NULL DEFAULT 0 CHECK (synthesized = 0 OR synthesized = 1),
  created_at   TEXT NOT NULL
) STRICT;
INSERT INTO key_events (key_id, action, role, datasets, actor, synthesized, created_at)
  SELECT id, action, role, datasets, 'unknown', 1, at
    FROM (SELECT id, 'create' AS action, role, datasets, created_at AS at FROM api_keys
          UNION ALL
          SELECT id, 'revoke', role, datasets, revoked_at FROM api_keys
           WHERE revoked_at IS NOT NULL)
   ORDER BY at, action, id;

-- A dataset's administrative rows (GET /v1/datasets/{id}/audit), found
-- without walking its charges; charges, which are most rows, are not in it.
CREATE INDEX ledger_admin_rows ON ledger (dataset_id, seq)
  WHERE kind = 'create' OR kind = 'budget' OR kind = 'archive';
