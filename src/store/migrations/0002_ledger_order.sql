-- Entries booked in the same instant keep the order they were booked in.
ALTER TABLE ledger_entries ADD COLUMN seq bigserial;
DROP INDEX ledger_entries_org_at;
CREATE INDEX ledger_entries_org_at ON ledger_entries (org_id, at DESC, seq DESC);
