-- A text search that matches a large part of a target's fingerprints
-- (`?q=` with the target's domain) reads the target's rows of the search
-- table (migration 0037) instead of every fingerprint: narrow rows with
-- their text already lower-cased, where the fingerprints' rows are wide
-- and rewritten by every sighting. This index finds a target's rows; it
-- is written by the api's indexer, off the ingester's write path.
CREATE INDEX fingerprint_search_target_idx ON fingerprint_search (target_id);
