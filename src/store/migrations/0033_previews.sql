-- Preview environments (issue #26 item 3): `<app>--<preview>`, an app of its own made from
-- an app, with an ephemeral branch of each database attached to it, read-only keys to its
-- buckets, its secrets and protection copied, and an expiry. The preview row is what the
-- API shows; what it made is found from it (its app, its branches), so that deleting it
-- (or its expiry, or a failed creation) removes exactly that.
CREATE TABLE previews (
  id             text PRIMARY KEY,
  org_id         text NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,
  -- The app it previews. Deleting that app deletes its previews first (apps/teardown.ts).
  app_id         text NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
  name           text NOT NULL,
  -- The app it made (`<app>--<name>`); null once that app is gone (a failed preview keeps
  -- its row, with the reason, until it is deleted or expires).
  preview_app_id text REFERENCES apps(id) ON DELETE SET NULL,
  app_name       text NOT NULL,
  state          text NOT NULL CHECK (state IN ('creating', 'ready', 'failed')),
  state_reason   text,
  -- The app's live release when the preview was asked for: what the preview runs.
  release_id     text REFERENCES releases(id) ON DELETE SET NULL,
  release_version integer,
  -- The preview app's deploy of that release, once made.
  deploy_id      text,
  -- The Git branch it follows, when a push made it (for the branch's delete to find it).
  git_branch     text,
  expires_at     timestamptz NOT NULL,
  created_at     timestamptz NOT NULL DEFAULT now(),
  UNIQUE (app_id, name)
);
CREATE INDEX previews_expiry ON previews (expires_at);
CREATE UNIQUE INDEX previews_app ON previews (preview_app_id) WHERE preview_app_id IS NOT NULL;

-- The database branches a preview made, one per database attached to its app. A branch
-- deleted (by the preview's removal, or by hand) takes its row with it.
CREATE TABLE preview_databases (
  preview_id  text NOT NULL REFERENCES previews(id) ON DELETE CASCADE,
  source_id   text NOT NULL,
  source_name text NOT NULL,
  database_id text NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  PRIMARY KEY (preview_id, source_id)
);
CREATE INDEX preview_databases_database ON preview_databases (database_id);

-- A key that may only read (GET, HEAD): a preview's keys to its app's buckets.
ALTER TABLE s3_keys ADD COLUMN read_only boolean NOT NULL DEFAULT false;
