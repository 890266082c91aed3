-- The dashboard's rollups (migration 0004) were rewritten by every update
-- that named one of the scan's counted columns, even when nothing they
-- count changed: a scan going from pending to running took its
-- contribution out of the user's two rollup rows and put it back, and
-- every scan of a user wrote the same rows. An update now touches them
-- only when what a scan contributes changes: its counts, its owner, its
-- creation time, its completion time, or whether it is completed.
DROP TRIGGER scans_rollup ON scans;

CREATE TRIGGER scans_rollup
    AFTER INSERT OR DELETE ON scans
    FOR EACH ROW EXECUTE FUNCTION scanfleet_scans_rollup();

CREATE TRIGGER scans_rollup_changed
    AFTER UPDATE OF status, completed_at, created_at, user_id,
        findings_count, critical_count, high_count ON scans
    FOR EACH ROW
    WHEN ((OLD.status = 'completed') IS DISTINCT FROM (NEW.status = 'completed')
          OR OLD.completed_at IS DISTINCT FROM NEW.completed_at
          OR OLD.created_at IS DISTINCT FROM NEW.created_at
          OR OLD.user_id IS DISTINCT FROM NEW.user_id
          OR OLD.findings_count IS DISTINCT FROM NEW.findings_count
          OR OLD.critical_count IS DISTINCT FROM NEW.critical_count
          OR OLD.high_count IS DISTINCT FROM NEW.high_count)
    EXECUTE FUNCTION scanfleet_scans_rollup();
