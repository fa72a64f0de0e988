-- App protection, network policy and public UDP endpoints (spec 4.6, issue #17 items 5-7).

-- One row per protected app; no row means public. `secret_*` is the app's HMAC key
-- (sealed with the secret box) that signs access cookies, signed links and access tokens:
-- rotating it invalidates every one of them at once. The password is an scrypt hash.
CREATE TABLE app_protection (
  app_id           text PRIMARY KEY REFERENCES apps(id) ON DELETE CASCADE,
  mode             text NOT NULL CHECK (mode IN ('password', 'signed')),
  password_hash    text,
  secret_nonce     bytea NOT NULL,
  secret_ciphertext bytea NOT NULL,
  updated_at       timestamptz NOT NULL DEFAULT now()
);

-- Signed links; deleting the row revokes the link (and the cookies it handed out).
CREATE TABLE protection_links (
  id         text PRIMARY KEY,
  app_id     text NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
  label      text NOT NULL,
  expires_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX protection_links_app ON protection_links (app_id, created_at);

-- The app's network policy; no row means no limits.
CREATE TABLE app_network_policy (
  app_id                     text PRIMARY KEY REFERENCES apps(id) ON DELETE CASCADE,
  bandwidth_mbit             integer,
  new_connections_per_minute integer,
  reason                     text,
  updated_at                 timestamptz NOT NULL DEFAULT now()
);

-- Public UDP endpoints: a platform-wide unique public port forwarding to target_port.
CREATE TABLE udp_endpoints (
  id          text PRIMARY KEY,
  app_id      text NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
  public_port integer NOT NULL UNIQUE,
  target_port integer NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX udp_endpoints_app ON udp_endpoints (app_id, created_at);
