-- A key minted by a device login may not outlast the key that approved it.
ALTER TABLE device_logins ADD COLUMN approver_expires_at timestamptz;
