-- Foundation: organizations, people, keys, audit, SSH, device login, names, apps,
-- secrets, the credit ledger and the durable job table.

CREATE TABLE orgs (
  id              text PRIMARY KEY,
  name            text NOT NULL,
  region          text NOT NULL,
  prepaid         boolean NOT NULL DEFAULT true,
  managed_by      text REFERENCES orgs(id),
  suspended_at    timestamptz,
  limit_apps      integer,
  limit_computers integer,
  created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX orgs_managed_by ON orgs (managed_by) WHERE managed_by IS NOT NULL;

CREATE TABLE users (
  id            text PRIMARY KEY,
  org_id        text NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,
  email         text NOT NULL,
  role          text NOT NULL CHECK (role IN ('admin', 'member')),
  password_hash text,
  created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX users_email ON users (lower(email));

CREATE TABLE api_keys (
  id           text PRIMARY KEY,
  org_id       text NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,
  user_id      text REFERENCES users(id) ON DELETE SET NULL,
  name         text NOT NULL,
  prefix       text NOT NULL,
  hash         bytea NOT NULL UNIQUE,
  scopes       text[],
  expires_at   timestamptz,
  agent        jsonb,
  console      boolean NOT NULL DEFAULT false,
  created_at   timestamptz NOT NULL DEFAULT now(),
  last_used_at timestamptz,
  revoked_at   timestamptz
);
CREATE INDEX api_keys_org ON api_keys (org_id, created_at);

CREATE TABLE agent_actions (
  id         text PRIMARY KEY,
  org_id     text NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,
  token_id   text NOT NULL,
  method     text NOT NULL,
  route      text NOT NULL,
  path       text NOT NULL,
  app        text,
  verdict    text NOT NULL CHECK (verdict IN ('allowed', 'refused')),
  code       text,
  request_id text NOT NULL,
  at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX agent_actions_org_at ON agent_actions (org_id, at DESC);
CREATE INDEX agent_actions_token_at ON agent_actions (token_id, at DESC);

CREATE TABLE ssh_keys (
  id          text PRIMARY KEY,
  org_id      text NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,
  user_id     text REFERENCES users(id) ON DELETE SET NULL,
  name        text NOT NULL,
  type        text NOT NULL,
  bits        integer NOT NULL,
  fingerprint text NOT NULL,
  public_key  text NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  UNIQUE (org_id, fingerprint)
);

CREATE TABLE ssh_tokens (
  id         text PRIMARY KEY,
  org_id     text NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,
  app_name   text NOT NULL,
  machine    text,
  prefix     text NOT NULL,
  hash       bytea NOT NULL UNIQUE,
  expires_at timestamptz NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ssh_tokens_org ON ssh_tokens (org_id, created_at);

CREATE TABLE device_logins (
  id               text PRIMARY KEY,
  device_code_hash bytea NOT NULL UNIQUE,
  user_code        text NOT NULL UNIQUE,
  client           text,
  version          text,
  requested_from   text NOT NULL,
  requested_at     timestamptz NOT NULL DEFAULT now(),
  expires_at       timestamptz NOT NULL,
  interval_s       integer NOT NULL,
  last_polled_at   timestamptz,
  state            text NOT NULL DEFAULT 'pending'
                   CHECK (state IN ('pending', 'approved', 'denied', 'redeemed')),
  org_id           text REFERENCES orgs(id) ON DELETE CASCADE,
  user_id          text REFERENCES users(id) ON DELETE CASCADE
);

-- One namespace for apps, databases, volumes and buckets across every organization.
CREATE TABLE names (
  name       text PRIMARY KEY,
  kind       text NOT NULL,
  org_id     text NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,
  created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE apps (
  id         text PRIMARY KEY,
  org_id     text NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,
  name       text NOT NULL UNIQUE REFERENCES names(name),
  computer   boolean NOT NULL DEFAULT false,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX apps_org ON apps (org_id, name);

CREATE TABLE secrets (
  app_id         text NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
  name           text NOT NULL,
  nonce          bytea NOT NULL,
  ciphertext     bytea NOT NULL,
  managed_reason text CHECK (managed_reason IN ('attachment', 'resource-password')),
  build          boolean,
  updated_at     timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (app_id, name)
);

CREATE TABLE credit_accounts (
  org_id           text PRIMARY KEY REFERENCES orgs(id) ON DELETE CASCADE,
  balance_micros   numeric(40, 0) NOT NULL DEFAULT 0,
  blocked_at       timestamptz,
  warn_at_percent  integer NOT NULL DEFAULT 20,
  min_topup_cents  integer NOT NULL DEFAULT 500,
  reference_cents  integer NOT NULL DEFAULT 0,
  created_at       timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE ledger_entries (
  id            text PRIMARY KEY,
  org_id        text NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,
  kind          text NOT NULL CHECK (kind IN ('topup', 'usage', 'grant', 'refund', 'adjustment')),
  amount_micros numeric(40, 0) NOT NULL,
  reference     text,
  window_from   timestamptz,
  window_to     timestamptz,
  detail        text,
  at            timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ledger_entries_org_at ON ledger_entries (org_id, at DESC, id DESC);

CREATE TABLE jobs (
  id           bigserial PRIMARY KEY,
  kind         text NOT NULL,
  payload      jsonb NOT NULL,
  state        text NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'running', 'done', 'failed')),
  attempts     integer NOT NULL DEFAULT 0,
  max_attempts integer NOT NULL,
  run_at       timestamptz NOT NULL DEFAULT now(),
  locked_by    text,
  locked_until timestamptz,
  steps        jsonb NOT NULL DEFAULT '{}',
  last_error   text,
  dedupe_key   text,
  created_at   timestamptz NOT NULL DEFAULT now(),
  finished_at  timestamptz
);
CREATE INDEX jobs_ready ON jobs (run_at) WHERE state IN ('queued', 'running');
CREATE UNIQUE INDEX jobs_dedupe ON jobs (kind, dedupe_key)
  WHERE dedupe_key IS NOT NULL AND state IN ('queued', 'running');
