-- What every page of findings pays however few findings it holds. The
-- fleet's ingester records pages of one or two findings (what a scan found
-- since its last event), so these fixed costs, not the per-row ones, set
-- Postgres' share of a small scan.
--
-- 1. The per-statement key checks of migration 0044 built their query as
--    text and planned it on every call (`EXECUTE`), three times a page:
--    the tables they check are named in static statements now, planned
--    once a connection.
-- 2. A page's insert moved its scan's revision in a statement of its own,
--    though the same statement had already updated the scan's counts (and
--    every update of a scan moves its revision, migration 0013): a second
--    write of the scan's row, with the checks of its foreign keys that a
--    row written earlier in the same transaction brings. A scan whose row
--    this transaction has already written is not written again.

CREATE OR REPLACE FUNCTION scanfleet_require_rows(tbl regclass, ids uuid[], key text)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    held bigint;
BEGIN
    IF tbl = 'scans'::regclass THEN
        SELECT count(*) INTO held FROM (SELECT 1 FROM scans WHERE id = ANY (ids) FOR KEY SHARE) l;
    ELSIF tbl = 'users'::regclass THEN
        SELECT count(*) INTO held FROM (SELECT 1 FROM users WHERE id = ANY (ids) FOR KEY SHARE) l;
    ELSIF tbl = 'targets'::regclass THEN
        SELECT count(*) INTO held FROM (SELECT 1 FROM targets WHERE id = ANY (ids) FOR KEY SHARE) l;
    ELSE
        EXECUTE format('SELECT count(*) FROM (SELECT 1 FROM %s WHERE id = ANY ($1) FOR KEY SHARE) l', tbl)
            INTO held USING ids;
    END IF;
    IF held < cardinality(ids) THEN
        RAISE EXCEPTION '% names a row of % that does not exist', key, tbl
            USING ERRCODE = 'foreign_key_violation';
    END IF;
END
$$;

-- A row whose `xmin` is this transaction's id was written by it (updated,
-- so its revision already moved, or inserted, so no reader has seen it).
-- A row written in a subtransaction has another id and is written again,
-- which is what happened before.
CREATE OR REPLACE FUNCTION findings_touch_scans() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        -- Findings removed by a cascade (a scan, target or user deleted)
        -- go with their scan, whose row the same command is deleting and
        -- which cannot be updated then.
        IF pg_trigger_depth() > 1 THEN
            RETURN NULL;
        END IF;
        UPDATE scans SET revision = revision + 1
        WHERE id IN (SELECT DISTINCT scan_id FROM changed_old)
          AND xmin <> pg_current_xact_id()::xid;
    ELSE
        UPDATE scans SET revision = revision + 1
        WHERE id IN (SELECT DISTINCT scan_id FROM changed_new)
          AND xmin <> pg_current_xact_id()::xid;
    END IF;
    RETURN NULL;
END
$$;
