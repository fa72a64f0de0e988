-- OAuth's keyless entrances are bounded in total, not only per address (oauth/totals.ts):
-- at most so many registered clients nobody has approved yet, and so many pending consent
-- requests; past that, the oldest are forgotten.

-- When a person first approved a client (a grant was made for it); NULL: never yet.
ALTER TABLE oauth_clients ADD COLUMN used_at timestamptz;
UPDATE oauth_clients c SET used_at = g.first_grant
  FROM (SELECT client_id, min(created_at) AS first_grant FROM oauth_grants GROUP BY client_id) g
  WHERE g.client_id = c.id;
CREATE INDEX oauth_clients_unused ON oauth_clients (created_at, id) WHERE used_at IS NULL;
CREATE INDEX oauth_requests_pending ON oauth_requests (created_at, id) WHERE status = 'pending';
