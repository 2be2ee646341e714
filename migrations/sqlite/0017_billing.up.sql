-- Billing: the per-environment Stripe connection, plans, checkout idempotency, and what the
-- signed webhooks record (events for dedupe, subscriptions, invoices), plus entitlement grants.
-- Subject ids are the product's opaque ids: no row here references users, so deleting a
-- subject's identity keeps its billing history.

-- secret_key and webhook_secret are store/seal blobs bound to the environment
-- (ProcessorSecretKeyAAD, ProcessorWebhookSecretAAD): no plaintext reaches the database.
CREATE TABLE processor_connections (
    id             TEXT NOT NULL PRIMARY KEY,
    environment_id TEXT NOT NULL UNIQUE REFERENCES environments (id) ON DELETE CASCADE,
    provider       TEXT NOT NULL CHECK (provider IN ('stripe')),
    mode           TEXT NOT NULL CHECK (mode IN ('test', 'live')),
    key_last4      TEXT NOT NULL,
    secret_key     TEXT NOT NULL,
    webhook_secret TEXT NOT NULL,
    created_at     TEXT NOT NULL,
    updated_at     TEXT NOT NULL
);

-- price_ids is a JSON object environment id → Stripe price id; entitlements a JSON object
-- feature key → boolean or number.
CREATE TABLE billing_plans (
    id               TEXT NOT NULL PRIMARY KEY,
    project_id       TEXT NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    key              TEXT NOT NULL,
    name             TEXT NOT NULL,
    description      TEXT,
    amount           INTEGER NOT NULL CHECK (amount >= 0),
    currency         TEXT NOT NULL,
    billing_interval TEXT NOT NULL CHECK (billing_interval IN ('month', 'year', 'one_time')),
    price_ids        TEXT NOT NULL,
    entitlements     TEXT NOT NULL,
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL,
    archived_at      TEXT,
    UNIQUE (project_id, key)
);

-- One row per (project, idempotency key): reserved (response NULL) before Stripe is called,
-- completed with the response body Stripe's answer produced.
CREATE TABLE checkout_requests (
    project_id      TEXT NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    idempotency_key TEXT NOT NULL,
    request_hash    TEXT NOT NULL,
    response        TEXT,
    reserved_at     TEXT NOT NULL,
    completed_at    TEXT,
    PRIMARY KEY (project_id, idempotency_key)
);

-- Every webhook event applied, by (environment, event id): a replay finds its row.
CREATE TABLE processor_events (
    environment_id TEXT NOT NULL REFERENCES environments (id) ON DELETE CASCADE,
    event_id       TEXT NOT NULL,
    type           TEXT NOT NULL,
    event_created  TEXT NOT NULL,
    received_at    TEXT NOT NULL,
    PRIMARY KEY (environment_id, event_id)
);

-- A subject's subscription (processor_id sub_…) or one-time purchase (the Checkout Session's
-- cs_…). event_created is the created time of the last event applied: with the period and the
-- status it orders updates, so an older event never rolls the row back.
CREATE TABLE billing_subscriptions (
    id                   TEXT NOT NULL PRIMARY KEY,
    project_id           TEXT NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    environment_id       TEXT NOT NULL REFERENCES environments (id) ON DELETE CASCADE,
    processor_id         TEXT NOT NULL,
    subject_id           TEXT NOT NULL,
    plan_key             TEXT NOT NULL,
    customer_id          TEXT NOT NULL,
    status               TEXT NOT NULL,
    current_period_start TEXT,
    current_period_end   TEXT,
    cancel_at_period_end INTEGER NOT NULL CHECK (cancel_at_period_end IN (0, 1)),
    event_created        TEXT NOT NULL,
    created_at           TEXT NOT NULL,
    updated_at           TEXT NOT NULL,
    UNIQUE (environment_id, processor_id)
);
CREATE INDEX billing_subscriptions_subject ON billing_subscriptions (project_id, subject_id);
CREATE INDEX billing_subscriptions_customer ON billing_subscriptions (environment_id, customer_id);

-- Invoices the webhooks reported paid or failed; paid is final.
CREATE TABLE billing_invoices (
    id              TEXT NOT NULL PRIMARY KEY,
    project_id      TEXT NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    environment_id  TEXT NOT NULL REFERENCES environments (id) ON DELETE CASCADE,
    processor_id    TEXT NOT NULL,
    subject_id      TEXT NOT NULL,
    subscription_id TEXT NOT NULL,
    status          TEXT NOT NULL CHECK (status IN ('paid', 'payment_failed')),
    amount          INTEGER NOT NULL,
    currency        TEXT NOT NULL,
    paid_at         TEXT,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL,
    UNIQUE (environment_id, processor_id)
);
CREATE INDEX billing_invoices_subject ON billing_invoices (project_id, subject_id);

-- value is the JSON text of a boolean or a number.
CREATE TABLE entitlement_grants (
    id          TEXT NOT NULL PRIMARY KEY,
    project_id  TEXT NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    subject_id  TEXT NOT NULL,
    feature_key TEXT NOT NULL,
    value       TEXT NOT NULL,
    reason      TEXT,
    expires_at  TEXT,
    actor_type  TEXT NOT NULL CHECK (actor_type IN ('user', 'service_account', 'system')),
    actor_id    TEXT NOT NULL,
    created_at  TEXT NOT NULL
);
CREATE INDEX entitlement_grants_subject ON entitlement_grants (project_id, subject_id);
