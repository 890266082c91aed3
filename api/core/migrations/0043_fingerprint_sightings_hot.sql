-- A sighting of a known fingerprint (each finding of a rescan) moved
-- `last_seen_at`, which the list index held: every sighting wrote a new
-- row version and a new entry in each of the table's four indexes. The
-- list now orders worst first, then by when each fingerprint was first
-- seen (newest first), which no sighting changes; and pages keep room for
-- the new version, so a sighting is a heap-only (HOT) update. The fill
-- factor applies to pages written from now on (a `VACUUM FULL
-- fingerprints` in a quiet hour applies it to the existing ones).
DROP INDEX fingerprints_target_list_idx;
CREATE INDEX fingerprints_target_list_idx
    ON fingerprints (target_id, severity_rank, first_seen_at DESC, id)
    INCLUDE (state, status, accepted_until);
ALTER TABLE fingerprints SET (fillfactor = 70);
