-- scanfleet schema, version 1. Migrations are forward-only: never edit an
-- applied file, add a new one.

CREATE TABLE tiers (
    slug            text PRIMARY KEY,
    name            text NOT NULL,
    price_cents     integer NOT NULL CHECK (price_cents >= 0),
    currency        text NOT NULL,
    billing_interval text NOT NULL CHECK (billing_interval IN ('month', 'year', 'none')),
    rate_limit_rpm  integer NOT NULL CHECK (rate_limit_rpm > 0),
    -- NULL means unlimited.
    scan_limit      integer CHECK (scan_limit IS NULL OR scan_limit >= 0),
    target_limit    integer CHECK (target_limit IS NULL OR target_limit >= 0),
    features        text[] NOT NULL DEFAULT '{}',
    purchasable     boolean NOT NULL,
    sort_order      integer NOT NULL
);

INSERT INTO tiers (slug, name, price_cents, currency, billing_interval, rate_limit_rpm,
                   scan_limit, target_limit, features, purchasable, sort_order) VALUES
    ('demo', 'Demo (Free)', 0, 'usd', 'month', 10, 10, 5,
     ARRAY['scans', 'schedules', 'websocket_progress', 'notifications'], false, 0),
    ('monthly', 'Monthly Pro', 2900, 'usd', 'month', 60, 60, 100,
     ARRAY['scans', 'schedules', 'websocket_progress', 'notifications', 'reports', 'api_keys'], true, 1),
    ('yearly', 'Yearly Pro', 29000, 'usd', 'year', 120, 120, 500,
     ARRAY['scans', 'schedules', 'websocket_progress', 'notifications', 'reports', 'api_keys'], true, 2),
    ('admin', 'Admin', 0, 'usd', 'none', 200, NULL, NULL,
     ARRAY['scans', 'schedules', 'websocket_progress', 'notifications', 'reports', 'api_keys', 'admin'], false, 3);

CREATE TABLE users (
    id            uuid PRIMARY KEY,
    -- Stored lower-cased; the unique index makes duplicates a conflict.
    email         text NOT NULL UNIQUE,
    password_hash text NOT NULL,
    full_name     text NOT NULL DEFAULT '',
    role          text NOT NULL DEFAULT 'user' CHECK (role IN ('user', 'admin')),
    tier_slug     text NOT NULL DEFAULT 'demo' REFERENCES tiers (slug),
    disabled      boolean NOT NULL DEFAULT false,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now()
);

-- One login = one session; its refresh tokens rotate on every use.
CREATE TABLE sessions (
    id             uuid PRIMARY KEY,
    user_id        uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at     timestamptz NOT NULL DEFAULT now(),
    expires_at     timestamptz NOT NULL,
    revoked_at     timestamptz,
    revoked_reason text
);
CREATE INDEX sessions_user_idx ON sessions (user_id);

CREATE TABLE refresh_tokens (
    -- SHA-256 of the opaque token; the token itself is never stored.
    token_hash bytea PRIMARY KEY,
    session_id uuid NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now(),
    -- Set when rotated; presenting a used token again revokes the session.
    used_at    timestamptz
);
CREATE INDEX refresh_tokens_session_idx ON refresh_tokens (session_id);

CREATE TABLE subscriptions (
    user_id                  uuid PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
    tier_slug                text NOT NULL REFERENCES tiers (slug),
    status                   text NOT NULL DEFAULT 'active'
                             CHECK (status IN ('active', 'trialing', 'past_due', 'canceled', 'incomplete')),
    current_period_start     timestamptz NOT NULL,
    current_period_end       timestamptz NOT NULL,
    cancel_at_period_end     boolean NOT NULL DEFAULT false,
    provider_customer_id     text,
    provider_subscription_id text UNIQUE,
    created_at               timestamptz NOT NULL DEFAULT now(),
    updated_at               timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE targets (
    id           uuid PRIMARY KEY,
    user_id      uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    domain       text NOT NULL,
    organization text NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (user_id, domain)
);
CREATE INDEX targets_user_created_idx ON targets (user_id, created_at DESC, id DESC);

CREATE TABLE schedules (
    id              uuid PRIMARY KEY,
    user_id         uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    target_id       uuid NOT NULL REFERENCES targets (id) ON DELETE CASCADE,
    engine          text NOT NULL CHECK (engine IN ('full', 'quick', 'recon')),
    cron_expression text NOT NULL,
    enabled         boolean NOT NULL DEFAULT true,
    next_run        timestamptz NOT NULL,
    last_run_at     timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX schedules_user_created_idx ON schedules (user_id, created_at DESC, id DESC);
CREATE INDEX schedules_due_idx ON schedules (next_run) WHERE enabled;

CREATE TABLE scans (
    id             uuid PRIMARY KEY,
    user_id        uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    target_id      uuid NOT NULL REFERENCES targets (id) ON DELETE CASCADE,
    schedule_id    uuid REFERENCES schedules (id) ON DELETE SET NULL,
    engine         text NOT NULL CHECK (engine IN ('full', 'quick', 'recon')),
    status         text NOT NULL DEFAULT 'queued'
                   CHECK (status IN ('queued', 'pending', 'running', 'completed', 'failed', 'stopped')),
    stage          text,
    progress       smallint NOT NULL DEFAULT 0 CHECK (progress BETWEEN 0 AND 100),
    current_tool   text,
    error          text,
    findings_count integer NOT NULL DEFAULT 0,
    critical_count integer NOT NULL DEFAULT 0,
    high_count     integer NOT NULL DEFAULT 0,
    medium_count   integer NOT NULL DEFAULT 0,
    low_count      integer NOT NULL DEFAULT 0,
    info_count     integer NOT NULL DEFAULT 0,
    created_at     timestamptz NOT NULL DEFAULT now(),
    started_at     timestamptz,
    completed_at   timestamptz,
    updated_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX scans_user_created_idx ON scans (user_id, created_at DESC, id DESC);
CREATE INDEX scans_target_idx ON scans (target_id);
CREATE INDEX scans_user_active_idx ON scans (user_id) WHERE status IN ('pending', 'running');
CREATE INDEX scans_user_completed_idx ON scans (user_id, completed_at) WHERE completed_at IS NOT NULL;
CREATE INDEX scans_unfinished_idx ON scans (updated_at) WHERE status IN ('queued', 'pending', 'running');

-- Scans created per user and period; counted in the same transaction as the
-- scan insert so that concurrent creates cannot overshoot the limit, and not
-- reduced when scans are deleted (every created scan counts).
CREATE TABLE scan_usage (
    user_id      uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    period_start timestamptz NOT NULL,
    scans        integer NOT NULL DEFAULT 0,
    PRIMARY KEY (user_id, period_start)
);

CREATE TABLE findings (
    id                uuid PRIMARY KEY,
    scan_id           uuid NOT NULL REFERENCES scans (id) ON DELETE CASCADE,
    user_id           uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    template_id       text NOT NULL,
    name              text NOT NULL,
    severity          text NOT NULL CHECK (severity IN ('critical', 'high', 'medium', 'low', 'info')),
    status            text NOT NULL DEFAULT 'open'
                      CHECK (status IN ('open', 'confirmed', 'false_positive', 'accepted_risk', 'fixed')),
    host              text NOT NULL,
    matched_at        text NOT NULL,
    description       text NOT NULL DEFAULT '',
    remediation       text NOT NULL DEFAULT '',
    matcher_name      text,
    extracted_results jsonb NOT NULL DEFAULT '[]',
    -- template_id:matched_at; the first occurrence in a scan wins.
    dedup_key         text NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT now(),
    UNIQUE (scan_id, dedup_key)
);
CREATE INDEX findings_user_idx ON findings (user_id);

CREATE TABLE notifications (
    id         uuid PRIMARY KEY,
    user_id    uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    type       text NOT NULL CHECK (type IN ('scan_complete', 'scan_failed', 'schedule_skipped')),
    title      text NOT NULL,
    message    text NOT NULL,
    scan_id    uuid REFERENCES scans (id) ON DELETE CASCADE,
    schedule_id uuid REFERENCES schedules (id) ON DELETE CASCADE,
    data       jsonb NOT NULL DEFAULT '{}',
    read       boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX notifications_user_created_idx ON notifications (user_id, created_at DESC, id DESC);
CREATE INDEX notifications_user_unread_idx ON notifications (user_id) WHERE NOT read;
-- A replayed terminal event must not notify twice.
CREATE UNIQUE INDEX notifications_scan_type_idx ON notifications (scan_id, type) WHERE scan_id IS NOT NULL;

CREATE TABLE api_keys (
    id           uuid PRIMARY KEY,
    user_id      uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name         text NOT NULL,
    -- SHA-256 of the raw key; the raw key is shown once at creation.
    key_hash     bytea NOT NULL UNIQUE,
    last4        text NOT NULL,
    permissions  text[] NOT NULL,
    expires_at   timestamptz NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz
);
CREATE INDEX api_keys_user_created_idx ON api_keys (user_id, created_at DESC, id DESC);
