-- OAuth 2.1 for hosted MCP clients (spec 2.3, 4.2, 5.9; src/oauth/). Public clients only:
-- nothing here is a client secret. Codes and refresh tokens are stored as SHA-256 hashes,
-- as keys are; access tokens are rows of api_keys (agent tokens), linked to their grant.

-- Clients that registered dynamically (RFC 7591). Clients named by a metadata document
-- URL (Client ID Metadata Documents) have no row: their document is the registration.
CREATE TABLE oauth_clients (
  id             text        PRIMARY KEY,
  client_name    text,
  redirect_uris  text[]      NOT NULL,
  grant_types    text[]      NOT NULL,
  response_types text[]      NOT NULL,
  scope          text,
  registered_from text       NOT NULL,
  created_at     timestamptz NOT NULL DEFAULT now()
);

-- What a person gave a client: the agent block its access tokens carry, the scopes, and
-- how long. Revoking it revokes its access tokens and ends its refresh tokens at once.
CREATE TABLE oauth_grants (
  id           text        PRIMARY KEY,
  org_id       text        NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,
  user_id      text,
  client_id    text        NOT NULL,
  client_name  text,
  verified     boolean     NOT NULL,
  redirect_uri text        NOT NULL,
  scopes       text[]      NOT NULL,
  agent        jsonb       NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  expires_at   timestamptz NOT NULL,
  revoked_at   timestamptz,
  revoked_why  text
);
CREATE INDEX oauth_grants_org ON oauth_grants (org_id, created_at);

-- One authorization request from /v1/oauth/authorize to the consent decision, and the
-- one code the decision hands out (single use, short-lived).
CREATE TABLE oauth_requests (
  id              text        PRIMARY KEY,
  client_id       text        NOT NULL,
  client_name     text,
  verified        boolean     NOT NULL,
  redirect_uri    text        NOT NULL,
  code_challenge  text        NOT NULL,
  state           text,
  scopes          text[]      NOT NULL,
  requested_from  text        NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT now(),
  expires_at      timestamptz NOT NULL,
  status          text        NOT NULL DEFAULT 'pending'
                  CHECK (status IN ('pending', 'approved', 'denied')),
  org_id          text        REFERENCES orgs(id) ON DELETE CASCADE,
  grant_id        text        REFERENCES oauth_grants(id) ON DELETE CASCADE,
  code_hash       bytea       UNIQUE,
  code_expires_at timestamptz,
  code_used_at    timestamptz
);
CREATE INDEX oauth_requests_expiry ON oauth_requests (expires_at);

-- Refresh tokens of a grant: each is spent by one refresh, which issues the next; a spent
-- one shown again means it leaked, and the whole grant is revoked (RFC 9700).
CREATE TABLE oauth_refresh_tokens (
  hash       bytea       PRIMARY KEY,
  grant_id   text        NOT NULL REFERENCES oauth_grants(id) ON DELETE CASCADE,
  created_at timestamptz NOT NULL DEFAULT now(),
  spent_at   timestamptz
);
CREATE INDEX oauth_refresh_tokens_grant ON oauth_refresh_tokens (grant_id);

-- The access tokens (agent keys) each grant issued, so that revoking it reaches them.
CREATE TABLE oauth_grant_keys (
  grant_id text NOT NULL REFERENCES oauth_grants(id) ON DELETE CASCADE,
  key_id   text NOT NULL REFERENCES api_keys(id) ON DELETE CASCADE,
  PRIMARY KEY (grant_id, key_id)
);

-- Hits on the keyless entrances per caller address and fixed window (spec 8), shared by
-- every replica. UNLOGGED like mcp_rate_windows: a lost count only opens a fresh window.
CREATE UNLOGGED TABLE entrance_rate_windows (
  bucket       text        NOT NULL,
  window_start timestamptz NOT NULL,
  hits         integer     NOT NULL,
  PRIMARY KEY (bucket, window_start)
);
