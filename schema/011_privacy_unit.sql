-- 011_privacy_unit.sql: label-private datasets.
--
-- Until now privacy_unit was a free description ("record", "user", ...)
-- that no code read: every release protected a whole row.  A dataset
-- created with privacy_unit "label" now declares label differential
-- privacy: its features are public, only its labels are protected, and
-- neighbouring tables differ in one row's label (the replace relation).
-- The label_em trainer uses such a table's features without noise, so the
-- declaration must be one dpgate recorded with that meaning, never text
-- written before it had one: label_private = 1 marks it, set only when a
-- dataset is created with privacy_unit "label" by a dpgate that knows the
-- meaning.  Existing datasets, whatever their text says, get 0 and stay
-- record-level (a label_em job on them is refused).
--
-- The check ties the flag to what it means: a label-private dataset is
-- private (a public one protects nothing), says "label" and has the
-- replace relation.  The flag and the unit are fixed at creation: no
-- statement updates them, and the trigger refuses one that would.  (A
-- later migration that rebuilds datasets must create the trigger again.)
ALTER TABLE datasets ADD COLUMN label_private INTEGER NOT NULL DEFAULT 0
  CHECK (label_private = 0
         OR (label_private = 1 AND public = 0 AND privacy_unit = 'label'
             AND neighbor = 'replace'));

CREATE TRIGGER datasets_privacy_unit_fixed
  BEFORE UPDATE OF privacy_unit, label_private, neighbor ON datasets
  WHEN NEW.privacy_unit IS NOT OLD.privacy_unit
    OR NEW.label_private IS NOT OLD.label_private
    OR NEW.neighbor IS NOT OLD.neighbor
BEGIN
  SELECT RAISE(ABORT, 'a dataset''s privacy unit and neighbouring relation are fixed at creation');
END;
