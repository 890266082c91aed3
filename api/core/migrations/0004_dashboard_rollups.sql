-- Dashboard rollups, kept by a trigger on scans so that the summary and the
-- charts read a handful of rows however many scans and findings a user has.
--   user_scan_totals: per user, scans and the sums of their finding counts.
--   user_daily_activity: per user and UTC day, scans created that day and
--   findings of the scans completed that day.
-- Every insert, delete and relevant update of a scan subtracts the old row's
-- contribution and adds the new one's, so totals stay exact under deletes
-- (target deletion cascades to scans) and late status changes.

CREATE TABLE user_scan_totals (
    user_id        uuid PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
    scans          bigint NOT NULL DEFAULT 0,
    findings_count bigint NOT NULL DEFAULT 0,
    critical_count bigint NOT NULL DEFAULT 0,
    high_count     bigint NOT NULL DEFAULT 0
);

CREATE TABLE user_daily_activity (
    user_id         uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    day             date NOT NULL,
    scans           bigint NOT NULL DEFAULT 0,
    vulnerabilities bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (user_id, day)
);

CREATE FUNCTION scanfleet_scan_contribution(
    p_user uuid, p_created timestamptz, p_status text, p_completed timestamptz,
    p_findings integer, p_critical integer, p_high integer, p_sign integer
) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    created_day date := (p_created AT TIME ZONE 'UTC')::date;
    completed_day date := (p_completed AT TIME ZONE 'UTC')::date;
BEGIN
    IF p_sign > 0 THEN
        INSERT INTO user_scan_totals AS t (user_id, scans, findings_count, critical_count, high_count)
        VALUES (p_user, 1, p_findings, p_critical, p_high)
        ON CONFLICT (user_id) DO UPDATE SET
            scans = t.scans + 1,
            findings_count = t.findings_count + EXCLUDED.findings_count,
            critical_count = t.critical_count + EXCLUDED.critical_count,
            high_count = t.high_count + EXCLUDED.high_count;
        INSERT INTO user_daily_activity AS d (user_id, day, scans)
        VALUES (p_user, created_day, 1)
        ON CONFLICT (user_id, day) DO UPDATE SET scans = d.scans + 1;
        IF p_status = 'completed' AND p_completed IS NOT NULL AND p_findings <> 0 THEN
            INSERT INTO user_daily_activity AS d (user_id, day, vulnerabilities)
            VALUES (p_user, completed_day, p_findings)
            ON CONFLICT (user_id, day) DO UPDATE SET vulnerabilities = d.vulnerabilities + EXCLUDED.vulnerabilities;
        END IF;
    ELSE
        -- Plain updates: when the user itself is being deleted its rollup
        -- rows are already gone, and nothing must be re-created.
        UPDATE user_scan_totals SET
            scans = scans - 1,
            findings_count = findings_count - p_findings,
            critical_count = critical_count - p_critical,
            high_count = high_count - p_high
        WHERE user_id = p_user;
        UPDATE user_daily_activity SET scans = scans - 1
        WHERE user_id = p_user AND day = created_day;
        IF p_status = 'completed' AND p_completed IS NOT NULL AND p_findings <> 0 THEN
            UPDATE user_daily_activity SET vulnerabilities = vulnerabilities - p_findings
            WHERE user_id = p_user AND day = completed_day;
        END IF;
    END IF;
END $$;

CREATE FUNCTION scanfleet_scans_rollup() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
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

CREATE TRIGGER scans_rollup
    AFTER INSERT OR DELETE OR UPDATE OF status, completed_at, created_at, user_id,
        findings_count, critical_count, high_count
    ON scans FOR EACH ROW EXECUTE FUNCTION scanfleet_scans_rollup();

-- Backfill from scans that exist already.
INSERT INTO user_scan_totals (user_id, scans, findings_count, critical_count, high_count)
SELECT user_id, count(*), sum(findings_count), sum(critical_count), sum(high_count)
FROM scans GROUP BY user_id;

INSERT INTO user_daily_activity (user_id, day, scans, vulnerabilities)
SELECT user_id, day, sum(scans), sum(vulns) FROM (
    SELECT user_id, (created_at AT TIME ZONE 'UTC')::date AS day, count(*) AS scans, 0 AS vulns
    FROM scans GROUP BY 1, 2
    UNION ALL
    SELECT user_id, (completed_at AT TIME ZONE 'UTC')::date, 0, sum(findings_count)
    FROM scans WHERE status = 'completed' AND completed_at IS NOT NULL GROUP BY 1, 2
) a GROUP BY 1, 2;
