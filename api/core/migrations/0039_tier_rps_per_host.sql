-- Issue 35: the tier sets the ceiling on requests a second to any one host
-- that a new target gets when `max_rps_per_host` is not given (a target's
-- own value, changed with PATCH /targets/{id}, always wins). Targets made
-- before this keep NULL: the scanner node's default (50).
ALTER TABLE tiers ADD COLUMN default_max_rps_per_host integer NOT NULL DEFAULT 50
    CHECK (default_max_rps_per_host BETWEEN 1 AND 1000);

UPDATE tiers SET default_max_rps_per_host = 100 WHERE slug IN ('yearly', 'admin');
