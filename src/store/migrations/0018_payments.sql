-- Payments (issue 16, services/payments/): the organization's customer at the payment
-- provider, its saved payment method and auto-recharge rule; every top-up (checkout or
-- auto-recharge) from pending to paid or failed; the provider events already handled.
-- A top-up is credited by one ledger entry of kind `topup` whose reference is its id,
-- at most once whatever the provider repeats.

CREATE TABLE payment_accounts (
  org_id            text PRIMARY KEY REFERENCES orgs(id) ON DELETE CASCADE,
  customer_id       text UNIQUE,
  payment_method_id text,
  recharge_enabled  boolean NOT NULL DEFAULT false,
  threshold_cents   integer NOT NULL DEFAULT 0,
  amount_cents      integer NOT NULL DEFAULT 0,
  cap_cents         integer NOT NULL DEFAULT 0,
  -- Charged or in flight over the whole schedule; a charge never takes it above the cap.
  recharged_cents   bigint NOT NULL DEFAULT 0,
  recharge_pending  boolean NOT NULL DEFAULT false,
  recharge_failed_at timestamptz
);

CREATE TABLE topups (
  id                text PRIMARY KEY,
  org_id            text NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,
  amount_cents      integer NOT NULL CHECK (amount_cents > 0),
  origin            text NOT NULL CHECK (origin IN ('checkout', 'auto-recharge')),
  state             text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'paid', 'failed')),
  session_id        text UNIQUE,
  payment_intent_id text,
  created_at        timestamptz NOT NULL DEFAULT now(),
  settled_at        timestamptz
);
CREATE INDEX topups_org ON topups (org_id, created_at DESC);

CREATE TABLE provider_events (
  id          text PRIMARY KEY,
  type        text NOT NULL,
  received_at timestamptz NOT NULL DEFAULT now()
);

CREATE UNIQUE INDEX ledger_topup_once ON ledger_entries (reference) WHERE kind = 'topup';
