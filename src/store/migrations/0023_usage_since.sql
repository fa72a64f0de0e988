-- Usage priced over the time it covers (issue 24, services/billing/pricing.ts): an event
-- records the interval it measures, [since, at) (a metering tick records the time since
-- the previous one), so a price list decided inside that interval prices exactly the part
-- after its moment. Rows recorded before this column existed keep NULL, read as
-- since = at: an instant priced by the list in force at `at`, as they were when booked,
-- so every window already booked is priced the same when asked again.

ALTER TABLE usage_events ADD COLUMN since timestamptz;
ALTER TABLE usage_events ADD CONSTRAINT usage_events_since_check
  CHECK (since IS NULL OR since <= at);
