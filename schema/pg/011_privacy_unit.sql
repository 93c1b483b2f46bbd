-- 011_privacy_unit.sql (PostgreSQL): label-private datasets, as
-- schema/011_privacy_unit.sql explains.  The same check ties the flag to
-- what it means, and SQLite's trigger becomes a plpgsql one: the flag, the
-- unit and the neighbouring relation are fixed at creation.
ALTER TABLE datasets ADD COLUMN label_private BIGINT NOT NULL DEFAULT 0
  CHECK (label_private = 0
         OR (label_private = 1 AND public = 0 AND privacy_unit = 'label'
             AND neighbor = 'replace'));

CREATE FUNCTION datasets_privacy_unit_fixed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.privacy_unit IS DISTINCT FROM OLD.privacy_unit
     OR NEW.label_private IS DISTINCT FROM OLD.label_private
     OR NEW.neighbor IS DISTINCT FROM OLD.neighbor THEN
    RAISE EXCEPTION 'a dataset''s privacy unit and neighbouring relation are fixed at creation';
  END IF;
  RETURN NEW;
END
$$;

CREATE TRIGGER datasets_privacy_unit_fixed
  BEFORE UPDATE OF privacy_unit, label_private, neighbor ON datasets
  FOR EACH ROW EXECUTE FUNCTION datasets_privacy_unit_fixed();
