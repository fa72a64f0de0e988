-- Deploys and releases (CONTRACT 7, issue #25 items 5-6).

-- A release: what one deploy put (or tried to put) live. `version` counts 1, 2, … per app;
-- it is taken when the deploy starts, so a deploy that fails leaves a `failed` release.
-- `deploying` is the release of a deploy under way (never listed). The secrets are the
-- app's own (not managed) secret values in force when the deploy began, sealed as one
-- JSON object bound to the release's id.
CREATE TABLE releases (
  id                text PRIMARY KEY,
  org_id            text NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,
  app_id            text NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
  version           integer NOT NULL,
  image             text NOT NULL,
  image_digest      text,
  build_id          text,
  config            jsonb NOT NULL,
  secret_names      text[] NOT NULL DEFAULT '{}',
  secrets_nonce     bytea,
  secrets_sealed    bytea,
  status            text NOT NULL CHECK (status IN ('deploying', 'live', 'superseded', 'failed')),
  created_at        timestamptz NOT NULL DEFAULT now(),
  live_at           timestamptz,
  UNIQUE (app_id, version)
);
CREATE UNIQUE INDEX releases_one_live ON releases (app_id) WHERE status = 'live';

-- A deploy: a durable job (`deploys.run`) takes it pending -> running -> done | error.
-- One at a time per app: the partial unique index is what makes `deploy-in-flight` exact
-- under concurrent requests.
CREATE TABLE deploys (
  id           text PRIMARY KEY,
  org_id       text NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,
  app_id       text NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
  status       text NOT NULL CHECK (status IN ('pending', 'running', 'done', 'error')),
  image        text NOT NULL,
  config       jsonb NOT NULL,
  strategy     text NOT NULL CHECK (strategy IN ('rolling', 'immediate')),
  release_id   text REFERENCES releases(id) ON DELETE SET NULL,
  rollback_of  integer,
  -- A rollback's target: its image, config and secrets are what the deploy runs.
  rollback_release_id text REFERENCES releases(id) ON DELETE SET NULL,
  -- How many machines the new release runs: fixed when the deploy starts, so a resumed
  -- deploy does not count the machines it already retired.
  machine_count integer,
  step         text,
  error        text,
  created_at   timestamptz NOT NULL DEFAULT now(),
  finished_at  timestamptz
);
CREATE INDEX deploys_app ON deploys (app_id, created_at DESC);
CREATE UNIQUE INDEX deploys_one_in_flight ON deploys (app_id)
  WHERE status IN ('pending', 'running');

-- The release a machine belongs to (null: made outside deploys): its secrets are the
-- release's, and a deploy tells its new machines from the ones it replaces by it.
ALTER TABLE machines ADD COLUMN release_id text REFERENCES releases(id) ON DELETE SET NULL;
-- A machine a deploy is retiring: out of the proxy's routes while its requests finish.
ALTER TABLE machines ADD COLUMN retiring_at timestamptz;
