-- Volumes (spec 2.6, 4.4): a subvolume of the storage pool with a quota of sizeGb, for
-- one app's machine. `class durable` volumes are copied to the platform archive (a
-- read-only snapshot) every flushIntervalS; durable_gen counts the copies.

CREATE TABLE volumes (
  id               text PRIMARY KEY,
  org_id           text NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,
  name             text NOT NULL UNIQUE REFERENCES names(name),
  size_gb          integer NOT NULL,
  mount_path       text NOT NULL,
  class            text NOT NULL CHECK (class IN ('standard', 'durable')),
  flush_interval_s integer NOT NULL,
  -- The pool volume holding the data.
  pool_volume      text NOT NULL,
  app_id           text REFERENCES apps(id) ON DELETE SET NULL,
  -- The machine that holds the volume now, and its lease (machines set these).
  machine_id       text,
  lease_host       text,
  lease_gen        integer NOT NULL DEFAULT 0,
  durable_gen      integer NOT NULL DEFAULT 0,
  durable_at       timestamptz,
  wal_durable_at   timestamptz,
  created_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX volumes_org ON volumes (org_id, name);
CREATE INDEX volumes_app ON volumes (app_id);
