-- Outbound webhooks (issue 27): endpoints, their signing secrets, an outbox
-- of events written in the transaction that records what they report, one
-- delivery per (event, webhook) and a log of every attempt.

-- A paid feature, like reports.
UPDATE tiers SET features = array_append(features, 'webhooks')
WHERE slug IN ('monthly', 'yearly', 'admin') AND NOT 'webhooks' = ANY (features);

ALTER TABLE notifications DROP CONSTRAINT notifications_type_check;
ALTER TABLE notifications ADD CONSTRAINT notifications_type_check
    CHECK (type IN ('scan_complete', 'scan_failed', 'schedule_skipped', 'webhook_disabled'));

-- 0 for critical to 4 for info: a finding is sent when its rank is at most
-- the webhook's min_severity's.
CREATE FUNCTION webhook_severity_rank(severity text) RETURNS integer
    LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE severity WHEN 'critical' THEN 0 WHEN 'high' THEN 1
        WHEN 'medium' THEN 2 WHEN 'low' THEN 3 ELSE 4 END
$$;

CREATE TABLE webhooks (
    id           uuid PRIMARY KEY,
    user_id      uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    url          text NOT NULL,
    kind         text NOT NULL CHECK (kind IN ('generic', 'slack')),
    events       text[] NOT NULL,
    -- finding.new and finding.regressed below this severity are not sent.
    min_severity text NOT NULL CHECK (min_severity IN ('critical', 'high', 'medium', 'low', 'info')),
    description  text NOT NULL DEFAULT '',
    enabled      boolean NOT NULL DEFAULT true,
    -- The first failed attempt since the last success; an endpoint failing
    -- for the whole disabling window is disabled.
    failing_since timestamptz,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhooks_user_idx ON webhooks (user_id, created_at DESC);

-- Every secret that signs: the current one (expires_at NULL) and, for 24 h
-- after a rotation, the previous one.
CREATE TABLE webhook_secrets (
    id         uuid PRIMARY KEY,
    webhook_id uuid NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    secret     text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz
);
CREATE INDEX webhook_secrets_webhook_idx ON webhook_secrets (webhook_id);

-- The outbox. `data` names what the event reports (scan, finding,
-- schedule); the body, in the API's shapes, is rendered once by the first
-- dispatcher that sends it and kept, so every attempt sends the same bytes.
CREATE TABLE webhook_events (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id     uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    type        text NOT NULL,
    data        jsonb NOT NULL,
    body        text,
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE webhook_deliveries (
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    webhook_id      uuid NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    event_id        uuid NOT NULL REFERENCES webhook_events (id) ON DELETE CASCADE,
    -- The Standard Webhooks `webhook-id`: the same on every attempt.
    message_id      text NOT NULL GENERATED ALWAYS AS ('msg_' || replace(id::text, '-', '')) STORED,
    state           text NOT NULL DEFAULT 'pending'
                    CHECK (state IN ('pending', 'delivered', 'failed')),
    attempts        integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    -- A dispatcher holds the delivery until then; past it, another takes it.
    lease_until     timestamptz,
    first_failed_at timestamptz,
    delivered_at    timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (next_attempt_at)
    WHERE state = 'pending';
CREATE INDEX webhook_deliveries_webhook_idx ON webhook_deliveries (webhook_id);

CREATE TABLE webhook_attempts (
    id              uuid PRIMARY KEY,
    delivery_id     uuid NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
    webhook_id      uuid NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    attempt         integer NOT NULL,
    status_code     integer,
    duration_ms     integer NOT NULL,
    error           text,
    response_body   text,
    next_attempt_at timestamptz,
    delivered_at    timestamptz,
    attempted_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_attempts_webhook_idx ON webhook_attempts (webhook_id, attempted_at DESC, id DESC);
