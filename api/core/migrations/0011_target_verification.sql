-- Ownership proof of targets (issue 12). Every target gets its own random
-- token; existing targets start unverified, like new ones. Dev mode does
-- not require proof by default, so they keep scanning there.
-- gen_random_uuid() draws from the server's strong random source; 32 hex
-- characters (122 random bits) make a token nobody can guess.
ALTER TABLE targets
    ADD COLUMN verification_token      text NOT NULL
        DEFAULT replace(gen_random_uuid()::text, '-', ''),
    -- `dns_txt`, `http_file` or `admin`; NULL while never proven.
    ADD COLUMN verification_method     text,
    ADD COLUMN verified_at             timestamptz,
    -- NULL with a proof: it does not expire (an administrator vouched).
    ADD COLUMN verification_expires_at timestamptz,
    ADD CONSTRAINT targets_verification_method_check
        CHECK (verification_method IN ('dns_txt', 'http_file', 'admin')),
    ADD CONSTRAINT targets_verification_consistent_check
        CHECK ((verification_method IS NULL) = (verified_at IS NULL));
