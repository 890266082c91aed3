-- The target findings list's text filter (`q`, the console's search box):
-- a trigram index over the text a user searches (name, template id, host,
-- URL), so a search of a target with 100,000 fingerprints reads the rows
-- that can match instead of all of them. pg_trgm is a trusted extension:
-- the database's owner may create it.
CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE INDEX fingerprints_text_idx ON fingerprints USING gin (
    (lower(name || ' ' || template_id || ' ' || host || ' ' || matched_at)) gin_trgm_ops
);
