-- Webhooks (spec 4.11, 6; docs/webhooks.md). A webhook is an organization's URL for some
-- mail event kinds; its signing secret is sealed with the master key (AES-256-GCM, bound
-- to the webhook's id). A 410 from the endpoint disables it (enabled false, a reason).
CREATE TABLE webhooks (
  id text PRIMARY KEY,
  org_id text NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,
  url text NOT NULL,
  events text[] NOT NULL,
  secret_nonce bytea NOT NULL,
  secret_ciphertext bytea NOT NULL,
  enabled boolean NOT NULL DEFAULT true,
  disabled_reason text,
  disabled_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhooks_org ON webhooks (org_id, created_at);

-- One event as the mail system reported it; `payload` is the exact body every delivery
-- of it sends (and signs), so retries carry the same bytes.
CREATE TABLE webhook_events (
  id text PRIMARY KEY,
  org_id text NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,
  kind text NOT NULL,
  payload text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_events_created ON webhook_events (created_at);

-- One event for one webhook: the durable schedule. The dispatcher claims rows whose
-- `next_attempt_at` has come (FOR UPDATE SKIP LOCKED) and holds them by `locked_until`
-- while an attempt runs, so a crashed replica's attempt is taken again when it lapses.
-- Deleting the webhook deletes its deliveries: nothing pending is sent after that.
CREATE TABLE webhook_deliveries (
  id text PRIMARY KEY,
  webhook_id text NOT NULL REFERENCES webhooks(id) ON DELETE CASCADE,
  event_id text NOT NULL REFERENCES webhook_events(id) ON DELETE CASCADE,
  org_id text NOT NULL,
  status text NOT NULL DEFAULT 'pending'
    CHECK (status IN ('pending', 'succeeded', 'failed', 'cancelled')),
  attempts integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz,
  locked_by text,
  locked_until timestamptz,
  response_status integer,
  error text,
  created_at timestamptz NOT NULL DEFAULT now(),
  finished_at timestamptz
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at)
  WHERE status = 'pending';
CREATE INDEX webhook_deliveries_webhook ON webhook_deliveries (webhook_id, created_at DESC);
CREATE INDEX webhook_deliveries_event ON webhook_deliveries (event_id);

-- Every attempt, as it ended.
CREATE TABLE webhook_attempts (
  delivery_id text NOT NULL REFERENCES webhook_deliveries(id) ON DELETE CASCADE,
  attempt integer NOT NULL,
  started_at timestamptz NOT NULL,
  duration_ms integer NOT NULL,
  response_status integer,
  error text,
  outcome text NOT NULL CHECK (outcome IN ('succeeded', 'retry', 'failed', 'disabled')),
  next_attempt_at timestamptz,
  PRIMARY KEY (delivery_id, attempt)
);
