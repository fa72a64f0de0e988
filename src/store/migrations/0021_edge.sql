-- The edge (issue 17): custom domains of apps, whole-zone claims, the certificates the
-- ACME CA issued for them (sealed at rest), the ACME account, and the answers to ACME
-- challenges in flight (so whichever replica the CA reaches answers them).

CREATE TABLE edge_zones (
  id              text PRIMARY KEY,
  org_id          text NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,
  zone            text NOT NULL UNIQUE,
  -- Label of the delegated DNS-01 name: _acme-challenge.<zone> CNAME <label>.acme.<edge>.
  acme_label      text NOT NULL UNIQUE,
  status          text NOT NULL DEFAULT 'pending_dns'
                  CHECK (status IN ('pending_dns', 'verified', 'cert_issued', 'error')),
  error           text,
  attempts        integer NOT NULL DEFAULT 0,
  last_checked_at timestamptz,
  verified_at     timestamptz,
  cert_issued_at  timestamptz,
  cert_not_after  timestamptz,
  -- When the sweep queues the next check (retry after a failure, or renewal).
  next_check_at   timestamptz,
  created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX edge_zones_org ON edge_zones (org_id, zone);

CREATE TABLE edge_domains (
  id              text PRIMARY KEY,
  org_id          text NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,
  app_id          text NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
  domain          text NOT NULL UNIQUE,
  -- The value of the ownership TXT record _pier-challenge.<domain>.
  proof           text NOT NULL,
  -- Set when a proven zone of the org covers the name: no record of its own needed.
  zone_id         text REFERENCES edge_zones(id),
  status          text NOT NULL DEFAULT 'pending_dns'
                  CHECK (status IN ('pending_dns', 'verified', 'cert_issued', 'error')),
  error           text,
  redirect_to     text,
  attempts        integer NOT NULL DEFAULT 0,
  last_checked_at timestamptz,
  verified_at     timestamptz,
  cert_issued_at  timestamptz,
  cert_not_after  timestamptz,
  next_check_at   timestamptz,
  created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX edge_domains_app ON edge_domains (app_id, domain);

-- One row per certificate name: a domain, or `*.<zone>`. Key sealed with the secret box.
CREATE TABLE edge_certificates (
  name        text PRIMARY KEY,
  key_nonce   bytea NOT NULL,
  key_sealed  bytea NOT NULL,
  chain_pem   text NOT NULL,
  not_after   timestamptz NOT NULL,
  issued_at   timestamptz NOT NULL DEFAULT now()
);

-- The ACME account per directory URL; its key sealed.
CREATE TABLE edge_acme_accounts (
  directory_url text PRIMARY KEY,
  account_url   text NOT NULL,
  key_nonce     bytea NOT NULL,
  key_sealed    bytea NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT now()
);

-- Challenge answers in flight: HTTP-01 by token, DNS-01 TXT values by DNS name.
CREATE TABLE edge_challenges (
  kind       text NOT NULL CHECK (kind IN ('http-01', 'dns-01')),
  key        text NOT NULL,
  value      text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (kind, key, value)
);
