-- Payments through the provider (issue 10). Forward-only: never edit once
-- applied, add a new file.
--
-- A subscription row now mirrors the provider's subscription: its ids, the
-- price and item that the upgrade call changes, and the provider time of the
-- newest change applied (`provider_updated_at`), so that a webhook event
-- older than what the row holds is ignored. NULL there means no snapshot of
-- the provider's subscription has been applied yet (only the checkout
-- completion), and any snapshot wins.

UPDATE subscriptions SET status = 'active' WHERE status = 'trialing';
UPDATE subscriptions SET status = 'past_due' WHERE status = 'incomplete';
ALTER TABLE subscriptions DROP CONSTRAINT subscriptions_status_check;
ALTER TABLE subscriptions ADD CONSTRAINT subscriptions_status_check
    CHECK (status IN ('active', 'past_due', 'canceled'));

ALTER TABLE subscriptions
    ADD COLUMN provider_item_id    text,
    ADD COLUMN provider_price_id   text,
    ADD COLUMN provider_updated_at timestamptz;

-- Checkout sessions started through POST /subscriptions/checkout: which user
-- and tier a provider session is for.
CREATE TABLE checkout_sessions (
    -- The provider's session id (`cs_...`).
    id           text PRIMARY KEY,
    user_id      uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    tier_slug    text NOT NULL REFERENCES tiers (slug),
    provider     text NOT NULL CHECK (provider IN ('stripe', 'dev')),
    status       text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'completed', 'abandoned')),
    created_at   timestamptz NOT NULL DEFAULT now(),
    finished_at  timestamptz
);
CREATE INDEX checkout_sessions_user_idx ON checkout_sessions (user_id);

-- Webhook events already applied, by the provider's event id: a redelivery
-- is acknowledged and changes nothing.
CREATE TABLE payment_events (
    id                  text PRIMARY KEY,
    type                text NOT NULL,
    provider_created_at timestamptz NOT NULL,
    received_at         timestamptz NOT NULL DEFAULT now()
);
