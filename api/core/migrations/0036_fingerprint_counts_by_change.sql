-- A target's findings list filtered by change (`?change=new`) takes its
-- total from the kept counts too, instead of counting every open
-- fingerprint: the counts gain the fingerprint's last change. A sighting
-- that keeps the change (a recurring finding seen again) moves no count,
-- as before; the first rescan moves each `new` group to `recurring` once
-- per statement.
TRUNCATE fingerprint_counts;
ALTER TABLE fingerprint_counts
    ADD COLUMN last_change text NOT NULL,
    DROP CONSTRAINT fingerprint_counts_pkey,
    ADD PRIMARY KEY (target_id, state, status, severity_rank, accepted_until, last_change);

CREATE OR REPLACE FUNCTION scanfleet_fingerprint_counts_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO fingerprint_counts AS c
        (target_id, state, status, severity_rank, accepted_until, last_change, n)
    SELECT target_id, state, status, severity_rank,
           COALESCE(accepted_until, 'infinity'), last_change, count(*)
    FROM added
    GROUP BY 1, 2, 3, 4, 5, 6
    ORDER BY 1, 2, 3, 4, 5, 6
    ON CONFLICT (target_id, state, status, severity_rank, accepted_until, last_change)
    DO UPDATE SET n = c.n + EXCLUDED.n;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION scanfleet_fingerprint_counts_update() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO fingerprint_counts AS c
        (target_id, state, status, severity_rank, accepted_until, last_change, n)
    SELECT target_id, state, status, severity_rank, until, last_change, sum(k)
    FROM (SELECT target_id, state, status, severity_rank,
                 COALESCE(accepted_until, 'infinity') AS until, last_change, 1 AS k
          FROM added
          UNION ALL
          SELECT target_id, state, status, severity_rank,
                 COALESCE(accepted_until, 'infinity'), last_change, -1
          FROM removed) AS d
    GROUP BY 1, 2, 3, 4, 5, 6
    HAVING sum(k) <> 0
    ORDER BY 1, 2, 3, 4, 5, 6
    ON CONFLICT (target_id, state, status, severity_rank, accepted_until, last_change)
    DO UPDATE SET n = c.n + EXCLUDED.n;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION scanfleet_fingerprint_counts_delete() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE fingerprint_counts AS c SET n = c.n - d.n
    FROM (SELECT target_id, state, status, severity_rank,
                 COALESCE(accepted_until, 'infinity') AS until, last_change, count(*) AS n
          FROM removed
          GROUP BY 1, 2, 3, 4, 5, 6) AS d
    WHERE c.target_id = d.target_id AND c.state = d.state AND c.status = d.status
      AND c.severity_rank = d.severity_rank AND c.accepted_until = d.until
      AND c.last_change = d.last_change;
    RETURN NULL;
END
$$;

INSERT INTO fingerprint_counts
    (target_id, state, status, severity_rank, accepted_until, last_change, n)
SELECT target_id, state, status, severity_rank, COALESCE(accepted_until, 'infinity'),
       last_change, count(*)
FROM fingerprints
GROUP BY 1, 2, 3, 4, 5, 6;
