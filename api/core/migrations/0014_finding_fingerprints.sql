-- Findings with a memory (issue 26). A fingerprint is a target plus the
-- contract's dedup key `template_id:matched_at`, with `matched_at`
-- normalised (scheme and host lower-cased, the scheme's default port
-- dropped): one row per target and fingerprint holds its life across scans.
-- The ingester maintains it in the transaction that records each finding.

-- The normalisation rule, as `scanfleet_core::fingerprint::normalise_matched_at`
-- applies it in the ingester; used here for the backfill only.
CREATE FUNCTION scanfleet_normalise_matched_at(raw text) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    parts text[];
    scheme text;
    authority text;
    userinfo text := '';
    host text;
    at_pos integer;
BEGIN
    parts := regexp_match(raw, '^([A-Za-z][A-Za-z0-9+.-]*)://([^/?#]*)(.*)$');
    IF parts IS NULL THEN
        RETURN raw;
    END IF;
    scheme := lower(parts[1]);
    authority := parts[2];
    at_pos := length(authority) - strpos(reverse(authority), '@') + 1;
    IF strpos(authority, '@') > 0 THEN
        userinfo := substr(authority, 1, at_pos);
        host := substr(authority, at_pos + 1);
    ELSE
        host := authority;
    END IF;
    host := lower(host);
    IF (scheme IN ('http', 'ws') AND right(host, 3) = ':80')
       OR (scheme IN ('https', 'wss') AND right(host, 4) = ':443') THEN
        host := substr(host, 1, length(host) - strpos(reverse(host), ':'));
    END IF;
    RETURN scheme || '://' || userinfo || host || parts[3];
END
$$;

CREATE TABLE fingerprints (
    id             uuid PRIMARY KEY,
    user_id        uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    target_id      uuid NOT NULL REFERENCES targets (id) ON DELETE CASCADE,
    -- template_id:normalised matched_at
    fingerprint    text NOT NULL,
    template_id    text NOT NULL,
    name           text NOT NULL,
    severity       text NOT NULL CHECK (severity IN ('critical', 'high', 'medium', 'low', 'info')),
    -- critical 0 to info 4: lists sort worst first on an index.
    severity_rank  smallint NOT NULL,
    host           text NOT NULL,
    matched_at     text NOT NULL,
    -- The user's triage, carried by every later occurrence.
    status         text NOT NULL DEFAULT 'open'
                   CHECK (status IN ('open', 'confirmed', 'false_positive', 'accepted_risk', 'fixed')),
    -- An accepted risk counts as open again after this day.
    accepted_until date,
    -- What the scans say: found by the last scan that looked, or fixed.
    state          text NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'fixed')),
    first_seen_at  timestamptz NOT NULL,
    last_seen_at   timestamptz NOT NULL,
    first_scan_id  uuid REFERENCES scans (id) ON DELETE SET NULL,
    last_scan_id   uuid REFERENCES scans (id) ON DELETE SET NULL,
    fixed_at       timestamptz,
    -- Scans that found it.
    occurrences    integer NOT NULL DEFAULT 1,
    -- The change of its occurrence in `last_scan_id` (a scan can hold two
    -- raw keys of one fingerprint; the second takes the first's change).
    last_change    text NOT NULL DEFAULT 'new' CHECK (last_change IN ('new', 'recurring', 'regressed')),
    UNIQUE (target_id, fingerprint)
);
-- The target's findings, worst first, newest first within a severity; the
-- filters (state, status, severity) are read from the same index.
CREATE INDEX fingerprints_target_list_idx
    ON fingerprints (target_id, severity_rank, last_seen_at DESC, id)
    INCLUDE (state, status, accepted_until);
CREATE INDEX fingerprints_target_open_host_idx
    ON fingerprints (target_id, host) WHERE state = 'open';
CREATE INDEX fingerprints_user_idx ON fingerprints (user_id);

-- Every time a completed scan fixed a fingerprint (the diff of two scans
-- reads which were fixed between them).
CREATE TABLE fingerprint_fixes (
    fingerprint_id uuid NOT NULL REFERENCES fingerprints (id) ON DELETE CASCADE,
    scan_id        uuid NOT NULL REFERENCES scans (id) ON DELETE CASCADE,
    fixed_at       timestamptz NOT NULL,
    PRIMARY KEY (scan_id, fingerprint_id)
);
CREATE INDEX fingerprint_fixes_fingerprint_idx ON fingerprint_fixes (fingerprint_id);

-- A completed scan's changes, counted once when it completes.
CREATE TABLE scan_changes (
    scan_id   uuid PRIMARY KEY REFERENCES scans (id) ON DELETE CASCADE,
    new       integer NOT NULL,
    recurring integer NOT NULL,
    regressed integer NOT NULL,
    fixed     integer NOT NULL
);

ALTER TABLE findings ADD COLUMN fingerprint_id uuid REFERENCES fingerprints (id) ON DELETE SET NULL;
ALTER TABLE findings ADD COLUMN change text
    CHECK (change IN ('new', 'recurring', 'regressed'));
CREATE INDEX findings_fingerprint_idx ON findings (fingerprint_id);

-- Backfill: every finding already stored, in scan order. The earliest scan
-- of a target holding a fingerprint makes it `new`, later ones `recurring`;
-- its status is the one of its latest occurrence. Nothing is inferred
-- fixed: the scans before this migration did not record what they looked at.
CREATE TEMPORARY TABLE backfill ON COMMIT DROP AS
SELECT f.id AS finding_id, s.id AS scan_id, s.user_id, s.target_id,
       f.template_id || ':' || scanfleet_normalise_matched_at(f.matched_at) AS fingerprint,
       f.template_id, f.name, f.severity, f.host,
       scanfleet_normalise_matched_at(f.matched_at) AS matched_at,
       f.status, f.created_at,
       row_number() OVER (PARTITION BY s.target_id,
                          f.template_id || ':' || scanfleet_normalise_matched_at(f.matched_at)
                          ORDER BY s.created_at, s.id, f.created_at, f.id) AS nth_first,
       row_number() OVER (PARTITION BY s.target_id,
                          f.template_id || ':' || scanfleet_normalise_matched_at(f.matched_at)
                          ORDER BY s.created_at DESC, s.id DESC, f.created_at DESC, f.id DESC) AS nth_last
FROM findings f JOIN scans s ON s.id = f.scan_id;

INSERT INTO fingerprints (id, user_id, target_id, fingerprint, template_id, name, severity,
                          severity_rank, host, matched_at, status, state, first_seen_at,
                          last_seen_at, first_scan_id, last_scan_id, occurrences, last_change)
SELECT gen_random_uuid(), l.user_id, l.target_id, l.fingerprint, l.template_id, l.name,
       l.severity,
       CASE l.severity WHEN 'critical' THEN 0 WHEN 'high' THEN 1 WHEN 'medium' THEN 2
                       WHEN 'low' THEN 3 ELSE 4 END,
       l.host, l.matched_at, l.status, 'open', fst.created_at, l.created_at, fst.scan_id,
       l.scan_id,
       (SELECT count(DISTINCT b.scan_id) FROM backfill b
        WHERE b.target_id = l.target_id AND b.fingerprint = l.fingerprint),
       CASE WHEN fst.scan_id = l.scan_id THEN 'new' ELSE 'recurring' END
FROM backfill l
JOIN backfill fst ON fst.target_id = l.target_id AND fst.fingerprint = l.fingerprint
                 AND fst.nth_first = 1
WHERE l.nth_last = 1;

UPDATE findings f
SET fingerprint_id = fp.id,
    change = CASE WHEN fp.first_scan_id = b.scan_id THEN 'new' ELSE 'recurring' END,
    status = fp.status
FROM backfill b JOIN fingerprints fp ON fp.target_id = b.target_id AND fp.fingerprint = b.fingerprint
WHERE f.id = b.finding_id;

-- Completed scans before this migration: their new and recurring counts;
-- nothing was recorded as fixed or regressed by them.
INSERT INTO scan_changes (scan_id, new, recurring, regressed, fixed)
SELECT s.id,
       count(DISTINCT f.fingerprint_id) FILTER (WHERE f.change = 'new'),
       count(DISTINCT f.fingerprint_id) FILTER (WHERE f.change = 'recurring'),
       0, 0
FROM scans s LEFT JOIN findings f ON f.scan_id = s.id
WHERE s.status = 'completed'
GROUP BY s.id;

-- Retests: a scan of engine `retest` runs one finding's template against
-- its host; `retest_of` names the fingerprint, the only one it may fix.
ALTER TABLE scans DROP CONSTRAINT scans_engine_check;
ALTER TABLE scans ADD CONSTRAINT scans_engine_check
    CHECK (engine IN ('full', 'quick', 'recon', 'retest'));
ALTER TABLE scans ADD COLUMN retest_of uuid REFERENCES fingerprints (id) ON DELETE SET NULL;
CREATE INDEX scans_user_retests_idx ON scans (user_id)
    WHERE engine = 'retest' AND status IN ('queued', 'pending', 'running');
