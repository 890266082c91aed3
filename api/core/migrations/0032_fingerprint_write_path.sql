-- The ingester's write path (issue 36). Every finding the fleet reports
-- goes through one fingerprint upsert and one findings insert, and each
-- foreign key on those rows costs a lookup and a row lock per row (about as
-- much, together, as the findings insert itself). The keys below only ever
-- point at rows the inserting transaction holds: the fingerprint upsert
-- takes the scan's row lock before it writes (`fingerprints::record`), the
-- scan gives the target, and a finding's fingerprint is the row the same
-- transaction has just upserted. What the keys did on delete is kept, once
-- per statement instead of once per row.

-- A fingerprint goes with its target (the key on `target_id` stays), and a
-- user's targets go with the user, so the key on `user_id` only repeated
-- the target's cascade; the index served that key alone.
ALTER TABLE fingerprints DROP CONSTRAINT fingerprints_user_id_fkey;
DROP INDEX fingerprints_user_idx;

-- `first_scan_id` and `last_scan_id` become NULL when their scan goes, as
-- `ON DELETE SET NULL` did.
ALTER TABLE fingerprints DROP CONSTRAINT fingerprints_first_scan_id_fkey;
ALTER TABLE fingerprints DROP CONSTRAINT fingerprints_last_scan_id_fkey;

CREATE FUNCTION scanfleet_scans_forget_in_fingerprints() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE fingerprints SET first_scan_id = NULL
    WHERE first_scan_id IN (SELECT id FROM gone);
    UPDATE fingerprints SET last_scan_id = NULL
    WHERE last_scan_id IN (SELECT id FROM gone);
    RETURN NULL;
END
$$;

CREATE TRIGGER scans_forget_in_fingerprints AFTER DELETE ON scans
    REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT EXECUTE FUNCTION scanfleet_scans_forget_in_fingerprints();

-- A finding keeps its row when its fingerprint goes, without it, as
-- `ON DELETE SET NULL` did.
ALTER TABLE findings DROP CONSTRAINT findings_fingerprint_id_fkey;

CREATE FUNCTION scanfleet_fingerprints_forget_in_findings() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE findings SET fingerprint_id = NULL
    WHERE fingerprint_id IN (SELECT id FROM removed);
    RETURN NULL;
END
$$;

CREATE TRIGGER fingerprints_forget_in_findings AFTER DELETE ON fingerprints
    REFERENCING OLD TABLE AS removed
    FOR EACH STATEMENT EXECUTE FUNCTION scanfleet_fingerprints_forget_in_findings();
