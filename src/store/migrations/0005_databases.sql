-- Managed databases (spec 2.5, 4.3): a row per database, a row per server process
-- (instance: the primary, and a standby when host-redundant), archives of their history,
-- and attachments to apps. Servers and volumes live on a host; ports are the host's.

CREATE TABLE databases (
  id                  text PRIMARY KEY,
  org_id              text NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,
  name                text NOT NULL UNIQUE REFERENCES names(name),
  kind                text NOT NULL CHECK (kind IN ('postgres', 'redis')),
  host                text NOT NULL,
  -- The public port: the platform's TCP front, which pipes to the primary instance.
  port                integer NOT NULL,
  memory_mb           integer NOT NULL,
  size_gb             integer NOT NULL,
  persistent          boolean NOT NULL,
  flush_interval_s    integer,
  durability          text NOT NULL DEFAULT 'standard'
                      CHECK (durability IN ('standard', 'host-redundant')),
  locale              text,
  suspend_policy      jsonb,
  state               text NOT NULL DEFAULT 'ready' CHECK (state IN ('restoring', 'ready', 'failed')),
  state_reason        text,
  copy_kind           text CHECK (copy_kind IN ('fork', 'branch')),
  source_name         text,
  source_as_of        timestamptz,
  ephemeral           boolean NOT NULL DEFAULT false,
  expires_at          timestamptz,
  -- The password of role `app`, sealed with the master key: attachments hand it to apps.
  password_nonce      bytea NOT NULL,
  password_ciphertext bytea NOT NULL,
  url_handed_out_at   timestamptz,
  archive_id          text,
  -- What the sleep policy did last: running, suspended (frozen) or stopped.
  power               text NOT NULL DEFAULT 'running'
                      CHECK (power IN ('running', 'suspended', 'stopped')),
  created_at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX databases_org ON databases (org_id, name);
CREATE UNIQUE INDEX databases_port ON databases (host, port);
CREATE INDEX databases_expiry ON databases (expires_at) WHERE expires_at IS NOT NULL;

CREATE TABLE database_instances (
  id            text PRIMARY KEY,
  database_id   text NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  role          text NOT NULL CHECK (role IN ('primary', 'standby')),
  volume        text NOT NULL,
  internal_port integer NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX database_instances_db ON database_instances (database_id);

-- An archive is one linear history (WAL + base backups, or a timestamped AOF). A restore
-- in place starts a new one; the old one stays for forks to moments before the restore.
-- database_id is cleared when its database is deleted; the archive is destroyed once no
-- copy still being restored reads it.
CREATE TABLE database_archives (
  id            text PRIMARY KEY,
  org_id        text NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,
  database_id   text REFERENCES databases(id) ON DELETE SET NULL,
  kind          text NOT NULL CHECK (kind IN ('postgres', 'redis')),
  source_volume text,
  covers_until  timestamptz,
  created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX database_archives_db ON database_archives (database_id);

CREATE TABLE database_attachments (
  app_id      text NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
  database_id text NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  secret_name text NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (app_id, database_id)
);
CREATE INDEX database_attachments_db ON database_attachments (database_id);
