-- A target's findings list answers `X-Total-Count` from per-target counts
-- of its fingerprints, kept by triggers, instead of counting up to 100,000
-- rows a request. One row per combination the list filters on: state,
-- status (with the date an accepted risk lapses, since the status a list
-- shows depends on the day it is read) and severity.
CREATE TABLE fingerprint_counts (
    target_id      uuid NOT NULL REFERENCES targets (id) ON DELETE CASCADE,
    state          text NOT NULL,
    status         text NOT NULL,
    severity_rank  smallint NOT NULL,
    -- `accepted_until`, 'infinity' when there is none (a key holds no NULL).
    accepted_until date NOT NULL,
    n              bigint NOT NULL,
    PRIMARY KEY (target_id, state, status, severity_rank, accepted_until)
);

-- Rows are counted per statement (transition tables), so an ingester page
-- of findings moves each count once. Groups are written in key order, so
-- two transactions touching the same target's counts lock them in the
-- same order.
CREATE FUNCTION scanfleet_fingerprint_counts_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO fingerprint_counts AS c
        (target_id, state, status, severity_rank, accepted_until, n)
    SELECT target_id, state, status, severity_rank,
           COALESCE(accepted_until, 'infinity'), count(*)
    FROM added
    GROUP BY 1, 2, 3, 4, 5
    ORDER BY 1, 2, 3, 4, 5
    ON CONFLICT (target_id, state, status, severity_rank, accepted_until)
    DO UPDATE SET n = c.n + EXCLUDED.n;
    RETURN NULL;
END
$$;

CREATE FUNCTION scanfleet_fingerprint_counts_update() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO fingerprint_counts AS c
        (target_id, state, status, severity_rank, accepted_until, n)
    SELECT target_id, state, status, severity_rank, until, sum(k)
    FROM (SELECT target_id, state, status, severity_rank,
                 COALESCE(accepted_until, 'infinity') AS until, 1 AS k
          FROM added
          UNION ALL
          SELECT target_id, state, status, severity_rank,
                 COALESCE(accepted_until, 'infinity'), -1
          FROM removed) AS d
    GROUP BY 1, 2, 3, 4, 5
    HAVING sum(k) <> 0
    ORDER BY 1, 2, 3, 4, 5
    ON CONFLICT (target_id, state, status, severity_rank, accepted_until)
    DO UPDATE SET n = c.n + EXCLUDED.n;
    RETURN NULL;
END
$$;

-- An update, never an insert: when a target is deleted its counts may be
-- gone before its fingerprints are.
CREATE FUNCTION scanfleet_fingerprint_counts_delete() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE fingerprint_counts AS c SET n = c.n - d.n
    FROM (SELECT target_id, state, status, severity_rank,
                 COALESCE(accepted_until, 'infinity') AS until, count(*) AS n
          FROM removed
          GROUP BY 1, 2, 3, 4, 5) AS d
    WHERE c.target_id = d.target_id AND c.state = d.state AND c.status = d.status
      AND c.severity_rank = d.severity_rank AND c.accepted_until = d.until;
    RETURN NULL;
END
$$;

CREATE TRIGGER fingerprint_counts_insert AFTER INSERT ON fingerprints
    REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION scanfleet_fingerprint_counts_insert();
CREATE TRIGGER fingerprint_counts_update AFTER UPDATE ON fingerprints
    REFERENCING OLD TABLE AS removed NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION scanfleet_fingerprint_counts_update();
CREATE TRIGGER fingerprint_counts_delete AFTER DELETE ON fingerprints
    REFERENCING OLD TABLE AS removed
    FOR EACH STATEMENT EXECUTE FUNCTION scanfleet_fingerprint_counts_delete();

-- The fingerprints already stored.
INSERT INTO fingerprint_counts (target_id, state, status, severity_rank, accepted_until, n)
SELECT target_id, state, status, severity_rank, COALESCE(accepted_until, 'infinity'), count(*)
FROM fingerprints
GROUP BY 1, 2, 3, 4, 5;
