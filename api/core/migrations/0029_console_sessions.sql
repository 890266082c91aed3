-- The web console's cookie sessions. Each is a row of `sessions` (so that
-- sign-out, a password change and an administrator's revocation end it as
-- they end an API login) plus the hash of the cookie's random token and the
-- session's CSRF token, which every state-changing console request echoes.
CREATE TABLE console_sessions (
    token_hash  bytea PRIMARY KEY,
    session_id  uuid NOT NULL UNIQUE REFERENCES sessions (id) ON DELETE CASCADE,
    csrf_token  text NOT NULL
);
