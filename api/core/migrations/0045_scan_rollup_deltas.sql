-- The dashboard's rollups (migration 0004) moved by what changed. An update
-- of a scan took the scan's whole contribution out of the user's rollup
-- rows and put the new one back: two writes of `user_scan_totals` and two
-- of `user_daily_activity` for every page of findings the ingester
-- recorded, though only the counts had moved. An update that keeps the
-- scan's owner and creation day now writes the difference: the totals once
-- when a count moved, the day of completion once when the findings it
-- counts moved, and the day of creation never. A rollup row that is
-- missing (it was never made) is made as the old way would have made it.

CREATE OR REPLACE FUNCTION scanfleet_scans_rollup() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    old_vulns bigint;
    new_vulns bigint;
    old_day date;
    new_day date;
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.user_id = NEW.user_id
       AND (OLD.created_at AT TIME ZONE 'UTC')::date = (NEW.created_at AT TIME ZONE 'UTC')::date THEN
        IF OLD.findings_count <> NEW.findings_count OR OLD.critical_count <> NEW.critical_count
           OR OLD.high_count <> NEW.high_count THEN
            UPDATE user_scan_totals SET
                findings_count = findings_count + (NEW.findings_count - OLD.findings_count),
                critical_count = critical_count + (NEW.critical_count - OLD.critical_count),
                high_count = high_count + (NEW.high_count - OLD.high_count)
            WHERE user_id = NEW.user_id;
            IF NOT FOUND THEN
                INSERT INTO user_scan_totals (user_id, scans, findings_count, critical_count, high_count)
                VALUES (NEW.user_id, 1, NEW.findings_count, NEW.critical_count, NEW.high_count);
            END IF;
        END IF;
        -- The findings a scan adds to the day it completed on.
        old_vulns := CASE WHEN OLD.status = 'completed' AND OLD.completed_at IS NOT NULL
                          THEN OLD.findings_count ELSE 0 END;
        new_vulns := CASE WHEN NEW.status = 'completed' AND NEW.completed_at IS NOT NULL
                          THEN NEW.findings_count ELSE 0 END;
        old_day := (OLD.completed_at AT TIME ZONE 'UTC')::date;
        new_day := (NEW.completed_at AT TIME ZONE 'UTC')::date;
        IF old_vulns <> 0 AND (new_vulns = 0 OR old_day <> new_day) THEN
            UPDATE user_daily_activity SET vulnerabilities = vulnerabilities - old_vulns
            WHERE user_id = OLD.user_id AND day = old_day;
            old_vulns := 0;
        END IF;
        IF new_vulns <> old_vulns THEN
            INSERT INTO user_daily_activity AS d (user_id, day, vulnerabilities)
            VALUES (NEW.user_id, new_day, new_vulns - old_vulns)
            ON CONFLICT (user_id, day) DO UPDATE
                SET vulnerabilities = d.vulnerabilities + EXCLUDED.vulnerabilities;
        END IF;
        RETURN NULL;
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        PERFORM scanfleet_scan_contribution(OLD.user_id, OLD.created_at, OLD.status, OLD.completed_at,
            OLD.findings_count, OLD.critical_count, OLD.high_count, -1);
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        PERFORM scanfleet_scan_contribution(NEW.user_id, NEW.created_at, NEW.status, NEW.completed_at,
            NEW.findings_count, NEW.critical_count, NEW.high_count, 1);
    END IF;
    RETURN NULL;
END $$;
