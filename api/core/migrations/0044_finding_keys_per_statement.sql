-- The ingester's write path (issue 36), continued from migration 0032. A
-- page of 1,000 findings checked three foreign keys on every row: the
-- finding's scan and user (a lookup and a row lock each, 2,000 a page, all
-- on the same two rows) and a new fingerprint's target. The checks are
-- kept, once per statement over the rows it wrote, and the deletes they
-- cascaded are kept, once per statement over the rows deleted. Last, the
-- two keys every finding is looked up by compare byte by byte.

ALTER TABLE findings DROP CONSTRAINT findings_scan_id_fkey;
ALTER TABLE findings DROP CONSTRAINT findings_user_id_fkey;
ALTER TABLE fingerprints DROP CONSTRAINT fingerprints_target_id_fkey;

-- A user's findings go with the user's scans (below), so the index on
-- `user_id` served the dropped key's cascade alone; no read uses it.
DROP INDEX findings_user_idx;

-- `ids` are the distinct values a statement wrote into column `key`; each
-- must name a row of `tbl`, held with the lock a foreign key takes (FOR
-- KEY SHARE) so that it cannot be deleted before the writer commits.
CREATE FUNCTION scanfleet_require_rows(tbl regclass, ids uuid[], key text)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    held bigint;
BEGIN
    EXECUTE format('SELECT count(*) FROM (SELECT 1 FROM %s WHERE id = ANY ($1) FOR KEY SHARE) l', tbl)
        INTO held USING ids;
    IF held < cardinality(ids) THEN
        RAISE EXCEPTION '% names a row of % that does not exist', key, tbl
            USING ERRCODE = 'foreign_key_violation';
    END IF;
END
$$;

CREATE FUNCTION scanfleet_findings_require_keys() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    scan_ids uuid[];
    user_ids uuid[];
BEGIN
    SELECT array_agg(DISTINCT scan_id), array_agg(DISTINCT user_id)
        INTO scan_ids, user_ids FROM written;
    PERFORM scanfleet_require_rows('scans', scan_ids, 'findings.scan_id');
    PERFORM scanfleet_require_rows('users', user_ids, 'findings.user_id');
    RETURN NULL;
END
$$;

CREATE TRIGGER findings_require_keys_insert AFTER INSERT ON findings
    REFERENCING NEW TABLE AS written
    FOR EACH STATEMENT EXECUTE FUNCTION scanfleet_findings_require_keys();

-- A finding never moves to another scan or user.
CREATE FUNCTION scanfleet_keys_do_not_move() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the % of a % row does not change', TG_ARGV[0], TG_TABLE_NAME
        USING ERRCODE = 'foreign_key_violation';
END
$$;

CREATE TRIGGER findings_keys_do_not_move BEFORE UPDATE OF scan_id, user_id ON findings
    FOR EACH ROW WHEN (OLD.scan_id IS DISTINCT FROM NEW.scan_id
                       OR OLD.user_id IS DISTINCT FROM NEW.user_id)
    EXECUTE FUNCTION scanfleet_keys_do_not_move('scan or user');

CREATE FUNCTION scanfleet_fingerprints_require_target() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM scanfleet_require_rows('targets', ARRAY(SELECT DISTINCT target_id FROM added), 'fingerprints.target_id');
    RETURN NULL;
END
$$;

CREATE TRIGGER fingerprints_require_target AFTER INSERT ON fingerprints
    REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION scanfleet_fingerprints_require_target();

CREATE TRIGGER fingerprints_target_does_not_move BEFORE UPDATE OF target_id ON fingerprints
    FOR EACH ROW WHEN (OLD.target_id IS DISTINCT FROM NEW.target_id)
    EXECUTE FUNCTION scanfleet_keys_do_not_move('target');

-- A scan's findings go with it (and a user's with the user's scans), as
-- `ON DELETE CASCADE` did.
CREATE FUNCTION scanfleet_scans_delete_findings() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM findings WHERE scan_id IN (SELECT id FROM gone);
    RETURN NULL;
END
$$;

CREATE TRIGGER scans_delete_findings AFTER DELETE ON scans
    REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT EXECUTE FUNCTION scanfleet_scans_delete_findings();

-- A target's fingerprints go with it.
CREATE FUNCTION scanfleet_targets_delete_fingerprints() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM fingerprints WHERE target_id IN (SELECT id FROM gone);
    RETURN NULL;
END
$$;

CREATE TRIGGER targets_delete_fingerprints AFTER DELETE ON targets
    REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT EXECUTE FUNCTION scanfleet_targets_delete_fingerprints();

-- The keys every page of findings is checked against, a fingerprint
-- (`template:url`) and a finding's dedup key, compare byte by byte: the
-- database's default collation compared them through the C library's
-- `strcoll` on every step down the two unique indexes. Both are
-- identities, never shown in an order.
ALTER TABLE fingerprints ALTER COLUMN fingerprint TYPE text COLLATE "C";
ALTER TABLE findings ALTER COLUMN dedup_key TYPE text COLLATE "C";
