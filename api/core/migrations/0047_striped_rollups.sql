-- The dashboard's rollups in stripes. Every scan of a user wrote the same
-- two rollup rows (the user's totals, and the day's activity), so a new
-- scan's insert waited for the row locks that the ingester's transaction
-- recording another scan of the same user held until its commit (the
-- scan's findings, its completion, its changes, its notifications): with
-- a fleet at work, a user's `POST /scans` spent most of its time waiting
-- for the user's own scans to be recorded. A scan now writes the rows of
-- its stripe (16 a user, chosen by the scan's id), and the readers add the
-- stripes up: two scans of a user share rows one time in sixteen.
--
-- Only the sum over a user's stripes means anything: a stripe's row may
-- hold a negative count. The rows are rebuilt here from the scans, as
-- migration 0004 first built them, so that each scan's contribution is in
-- its own stripe from the start.

ALTER TABLE user_scan_totals ADD COLUMN stripe smallint NOT NULL DEFAULT 0;
ALTER TABLE user_scan_totals DROP CONSTRAINT user_scan_totals_pkey;
ALTER TABLE user_scan_totals ADD PRIMARY KEY (user_id, stripe);
ALTER TABLE user_daily_activity ADD COLUMN stripe smallint NOT NULL DEFAULT 0;
ALTER TABLE user_daily_activity DROP CONSTRAINT user_daily_activity_pkey;
ALTER TABLE user_daily_activity ADD PRIMARY KEY (user_id, day, stripe);

-- A scan's stripe: the low four bits of its id's last byte (random in a
-- version 7 id, as in a version 4 one).
CREATE FUNCTION scanfleet_rollup_stripe(scan_id uuid) RETURNS smallint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
$$ SELECT (get_byte(uuid_send(scan_id), 15) & 15)::smallint $$;

CREATE FUNCTION scanfleet_scan_contribution(
    p_user uuid, p_stripe smallint, p_created timestamptz, p_status text,
    p_completed timestamptz, p_findings integer, p_critical integer, p_high integer,
    p_sign integer
) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    created_day date := (p_created AT TIME ZONE 'UTC')::date;
    completed_day date := (p_completed AT TIME ZONE 'UTC')::date;
BEGIN
    IF p_sign > 0 THEN
        INSERT INTO user_scan_totals AS t
            (user_id, stripe, scans, findings_count, critical_count, high_count)
        VALUES (p_user, p_stripe, 1, p_findings, p_critical, p_high)
        ON CONFLICT (user_id, stripe) DO UPDATE SET
            scans = t.scans + 1,
            findings_count = t.findings_count + EXCLUDED.findings_count,
            critical_count = t.critical_count + EXCLUDED.critical_count,
            high_count = t.high_count + EXCLUDED.high_count;
        INSERT INTO user_daily_activity AS d (user_id, day, stripe, scans)
        VALUES (p_user, created_day, p_stripe, 1)
        ON CONFLICT (user_id, day, stripe) DO UPDATE SET scans = d.scans + 1;
        IF p_status = 'completed' AND p_completed IS NOT NULL AND p_findings <> 0 THEN
            INSERT INTO user_daily_activity AS d (user_id, day, stripe, vulnerabilities)
            VALUES (p_user, completed_day, p_stripe, p_findings)
            ON CONFLICT (user_id, day, stripe) DO UPDATE
                SET vulnerabilities = d.vulnerabilities + EXCLUDED.vulnerabilities;
        END IF;
    ELSE
        -- Plain updates: when the user itself is being deleted its rollup
        -- rows are already gone, and nothing must be re-created.
        UPDATE user_scan_totals SET
            scans = scans - 1,
            findings_count = findings_count - p_findings,
            critical_count = critical_count - p_critical,
            high_count = high_count - p_high
        WHERE user_id = p_user AND stripe = p_stripe;
        UPDATE user_daily_activity SET scans = scans - 1
        WHERE user_id = p_user AND day = created_day AND stripe = p_stripe;
        IF p_status = 'completed' AND p_completed IS NOT NULL AND p_findings <> 0 THEN
            UPDATE user_daily_activity SET vulnerabilities = vulnerabilities - p_findings
            WHERE user_id = p_user AND day = completed_day AND stripe = p_stripe;
        END IF;
    END IF;
END $$;

-- Migration 0045's trigger, each write on the scan's stripe. The delta
-- path adds the difference to the stripe's row, making the row if it is
-- missing: a stripe row is only ever read in the sum.
CREATE OR REPLACE FUNCTION scanfleet_scans_rollup() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    old_vulns bigint;
    new_vulns bigint;
    old_day date;
    new_day date;
    v_stripe smallint;
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.user_id = NEW.user_id AND OLD.id = NEW.id
       AND (OLD.created_at AT TIME ZONE 'UTC')::date = (NEW.created_at AT TIME ZONE 'UTC')::date THEN
        v_stripe := scanfleet_rollup_stripe(NEW.id);
        IF OLD.findings_count <> NEW.findings_count OR OLD.critical_count <> NEW.critical_count
           OR OLD.high_count <> NEW.high_count THEN
            INSERT INTO user_scan_totals AS t
                (user_id, stripe, scans, findings_count, critical_count, high_count)
            VALUES (NEW.user_id, v_stripe, 0, NEW.findings_count - OLD.findings_count,
                    NEW.critical_count - OLD.critical_count, NEW.high_count - OLD.high_count)
            ON CONFLICT (user_id, stripe) DO UPDATE SET
                findings_count = t.findings_count + EXCLUDED.findings_count,
                critical_count = t.critical_count + EXCLUDED.critical_count,
                high_count = t.high_count + EXCLUDED.high_count;
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
            WHERE user_id = OLD.user_id AND day = old_day AND stripe = v_stripe;
            old_vulns := 0;
        END IF;
        IF new_vulns <> old_vulns THEN
            INSERT INTO user_daily_activity AS d (user_id, day, stripe, vulnerabilities)
            VALUES (NEW.user_id, new_day, v_stripe, new_vulns - old_vulns)
            ON CONFLICT (user_id, day, stripe) DO UPDATE
                SET vulnerabilities = d.vulnerabilities + EXCLUDED.vulnerabilities;
        END IF;
        RETURN NULL;
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        PERFORM scanfleet_scan_contribution(OLD.user_id, scanfleet_rollup_stripe(OLD.id),
            OLD.created_at, OLD.status, OLD.completed_at,
            OLD.findings_count, OLD.critical_count, OLD.high_count, -1);
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        PERFORM scanfleet_scan_contribution(NEW.user_id, scanfleet_rollup_stripe(NEW.id),
            NEW.created_at, NEW.status, NEW.completed_at,
            NEW.findings_count, NEW.critical_count, NEW.high_count, 1);
    END IF;
    RETURN NULL;
END $$;

DROP FUNCTION scanfleet_scan_contribution(uuid, timestamptz, text, timestamptz, integer, integer,
                                          integer, integer);

-- The rows rebuilt from the scans, each scan in its stripe.
DELETE FROM user_scan_totals;
DELETE FROM user_daily_activity;

INSERT INTO user_scan_totals (user_id, stripe, scans, findings_count, critical_count, high_count)
SELECT user_id, scanfleet_rollup_stripe(id), count(*), sum(findings_count), sum(critical_count),
       sum(high_count)
FROM scans GROUP BY 1, 2;

INSERT INTO user_daily_activity (user_id, day, stripe, scans, vulnerabilities)
SELECT user_id, day, stripe, sum(scans), sum(vulns) FROM (
    SELECT user_id, (created_at AT TIME ZONE 'UTC')::date AS day,
           scanfleet_rollup_stripe(id) AS stripe, count(*) AS scans, 0 AS vulns
    FROM scans GROUP BY 1, 2, 3
    UNION ALL
    SELECT user_id, (completed_at AT TIME ZONE 'UTC')::date, scanfleet_rollup_stripe(id), 0,
           sum(findings_count)
    FROM scans WHERE status = 'completed' AND completed_at IS NOT NULL GROUP BY 1, 2, 3
) a GROUP BY 1, 2, 3;
