-- Changes to credentials and tiers, announced at commit to every api
-- process's auth cache (api/src/auth/cache.rs): the payload is the user id.
CREATE FUNCTION notify_auth_change() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    changed jsonb := CASE WHEN TG_OP = 'INSERT' THEN to_jsonb(NEW) ELSE to_jsonb(OLD) END;
BEGIN
    PERFORM pg_notify('scanfleet_auth', COALESCE(changed ->> 'user_id', changed ->> 'id'));
    RETURN NULL;
END
$$;

CREATE TRIGGER users_auth_change AFTER UPDATE OR DELETE ON users
    FOR EACH ROW EXECUTE FUNCTION notify_auth_change();
CREATE TRIGGER sessions_auth_change AFTER UPDATE OR DELETE ON sessions
    FOR EACH ROW EXECUTE FUNCTION notify_auth_change();
-- Not on `last_used_at`, which a busy key updates once a minute.
CREATE TRIGGER api_keys_auth_change AFTER DELETE OR UPDATE OF user_id, permissions, expires_at
    ON api_keys FOR EACH ROW EXECUTE FUNCTION notify_auth_change();
CREATE TRIGGER subscriptions_auth_change AFTER INSERT OR UPDATE OR DELETE ON subscriptions
    FOR EACH ROW EXECUTE FUNCTION notify_auth_change();
