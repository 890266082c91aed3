-- A target's findings list searched by text (`?q=`) reads a trigram index
-- instead of every fingerprint of the target. The index is kept beside the
-- fingerprints, off the ingester's write path: a trigram index on the
-- fingerprints themselves made each new fingerprint cost about as much
-- again to record (docs/figures.md). Instead, a fingerprint whose text is
-- new (inserted, or its name, host or URL changed) is listed in
-- `fingerprint_search_pending`, a plain table with no index, in the same
-- statement; the api moves pending rows into `fingerprint_search` in
-- batches (`store::fingerprint_search::index_pending`). A search reads the
-- index and the pending list, and checks every candidate against the
-- fingerprint as it stands, so it gives exactly what reading every
-- fingerprint would, however far behind the index is.

CREATE EXTENSION IF NOT EXISTS pg_trgm;

-- What a search looks in, lower-cased: the name, template id, host and URL.
CREATE FUNCTION scanfleet_fingerprint_text(name text, template_id text, host text,
                                           matched_at text)
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT lower(name || ' ' || template_id || ' ' || host || ' ' || matched_at)
$$;

CREATE TABLE fingerprint_search (
    fingerprint_id uuid PRIMARY KEY,
    target_id      uuid NOT NULL,
    text           text NOT NULL
);
-- The text alone: with the target's id in the same index (btree_gin) a
-- search also intersected the target's posting list with the text's (at
-- 100,000 fingerprints, 19 ms in the index for 2,500 matches against 4 ms
-- without it); other targets' candidates are dropped by their row instead.
CREATE INDEX fingerprint_search_text_idx
    ON fingerprint_search USING gin (text gin_trgm_ops);

-- Fingerprints whose text the index does not hold yet (or holds as it
-- was). A fingerprint can be listed more than once.
CREATE TABLE fingerprint_search_pending (
    fingerprint_id uuid NOT NULL,
    target_id      uuid NOT NULL
);

CREATE FUNCTION scanfleet_fingerprint_search_added() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO fingerprint_search_pending (fingerprint_id, target_id)
    SELECT id, target_id FROM added;
    RETURN NULL;
END
$$;

CREATE FUNCTION scanfleet_fingerprint_search_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO fingerprint_search_pending (fingerprint_id, target_id)
    VALUES (NEW.id, NEW.target_id);
    RETURN NULL;
END
$$;

CREATE FUNCTION scanfleet_fingerprint_search_removed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM fingerprint_search WHERE fingerprint_id IN (SELECT id FROM removed);
    RETURN NULL;
END
$$;

CREATE TRIGGER fingerprint_search_added AFTER INSERT ON fingerprints
    REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION scanfleet_fingerprint_search_added();
-- A sighting sets the name, host and URL again, almost always to what they
-- were: only a real change is listed (the condition costs no function call).
CREATE TRIGGER fingerprint_search_changed AFTER UPDATE OF name, template_id, host, matched_at
    ON fingerprints FOR EACH ROW
    WHEN (OLD.name IS DISTINCT FROM NEW.name OR OLD.template_id IS DISTINCT FROM NEW.template_id
          OR OLD.host IS DISTINCT FROM NEW.host OR OLD.matched_at IS DISTINCT FROM NEW.matched_at)
    EXECUTE FUNCTION scanfleet_fingerprint_search_changed();
CREATE TRIGGER fingerprint_search_removed AFTER DELETE ON fingerprints
    REFERENCING OLD TABLE AS removed
    FOR EACH STATEMENT EXECUTE FUNCTION scanfleet_fingerprint_search_removed();

-- The fingerprints already stored.
INSERT INTO fingerprint_search (fingerprint_id, target_id, text)
SELECT id, target_id, scanfleet_fingerprint_text(name, template_id, host, matched_at)
FROM fingerprints;
