-- Liveness of machines (spec 2.11): whether the machine's internal port accepts
-- connections, as the platform's last probe found it, since when, and why not.

ALTER TABLE machines
  ADD COLUMN liveness        text CHECK (liveness IN ('listening', 'not-listening', 'no-signal')),
  ADD COLUMN liveness_reason text,
  ADD COLUMN liveness_since  timestamptz,
  ADD COLUMN liveness_at     timestamptz;
