-- A scan's revision grows with every change to what its detail shows: the
-- scan row itself and its findings (recorded, triaged or removed). The api
-- keeps serialised scan details in memory and serves one again only while
-- the scan's revision is the one it was read at.
ALTER TABLE scans ADD COLUMN revision bigint NOT NULL DEFAULT 0;

CREATE FUNCTION scans_next_revision() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.revision := OLD.revision + 1;
    RETURN NEW;
END
$$;

CREATE TRIGGER scans_revision BEFORE UPDATE ON scans
    FOR EACH ROW EXECUTE FUNCTION scans_next_revision();

-- Once per statement: an ingest batch of many findings moves its scan's
-- revision once.
CREATE FUNCTION findings_touch_scans() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        -- Findings removed by a cascade (a scan, target or user deleted)
        -- go with their scan, whose row the same command is deleting and
        -- which cannot be updated then.
        IF pg_trigger_depth() > 1 THEN
            RETURN NULL;
        END IF;
        UPDATE scans SET revision = revision + 1
        WHERE id IN (SELECT DISTINCT scan_id FROM changed_old);
    ELSE
        UPDATE scans SET revision = revision + 1
        WHERE id IN (SELECT DISTINCT scan_id FROM changed_new);
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER findings_revision_insert AFTER INSERT ON findings
    REFERENCING NEW TABLE AS changed_new
    FOR EACH STATEMENT EXECUTE FUNCTION findings_touch_scans();
CREATE TRIGGER findings_revision_update AFTER UPDATE ON findings
    REFERENCING NEW TABLE AS changed_new
    FOR EACH STATEMENT EXECUTE FUNCTION findings_touch_scans();
CREATE TRIGGER findings_revision_delete AFTER DELETE ON findings
    REFERENCING OLD TABLE AS changed_old
    FOR EACH STATEMENT EXECUTE FUNCTION findings_touch_scans();
