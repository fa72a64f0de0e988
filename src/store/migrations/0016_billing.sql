-- Billing (issue 16, services/billing/): the operator's price lists, kept as a history so
-- that every window is priced with the list in force at its start; the booking cursor
-- (every window before it is booked); at most one usage entry per organization, window
-- and usage kind, whatever crashes or replicas do; and how far storage has been metered.

CREATE TABLE price_lists (
  id         bigserial PRIMARY KEY,
  -- usage kind -> integer micro-cents per unit
  prices     jsonb NOT NULL,
  decided_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX price_lists_decided ON price_lists (decided_at);

-- One row: usage recorded before `booked_until` is booked.
CREATE TABLE billing_cursor (
  id           boolean PRIMARY KEY DEFAULT true CHECK (id),
  booked_until timestamptz NOT NULL
);

-- A usage entry names its usage kind in `reference`.
CREATE UNIQUE INDEX ledger_usage_once ON ledger_entries (org_id, window_from, reference)
  WHERE kind = 'usage';

-- The booker looks for the next recorded usage across every organization.
CREATE INDEX usage_events_at ON usage_events (at);

ALTER TABLE volumes ADD COLUMN metered_at timestamptz;
ALTER TABLE databases ADD COLUMN metered_at timestamptz;
ALTER TABLE buckets ADD COLUMN metered_at timestamptz;
