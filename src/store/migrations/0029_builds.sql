-- Sources and builds of apps (CONTRACT 7, issue #25 items 1-4).

-- An uploaded source tree: a gzip'd tar checked entry by entry on upload, kept on disk at
-- DATA_DIR/builds/sources/<id>.tar.gz. Pruned with the builds that used it.
CREATE TABLE build_sources (
  id          text PRIMARY KEY,
  org_id      text NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,
  app_id      text NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
  size_bytes  bigint NOT NULL,
  sha256      text NOT NULL,
  files       integer NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX build_sources_app ON build_sources (app_id, created_at);

-- A build: a durable job (`builds.run`) takes it queued -> building -> done | failed.
-- `image_digest` names the result in pier's image store (what `build:<id>` runs);
-- `builder` is `dockerfile` or what detect found (`static`, `node`, `python`, `go`).
CREATE TABLE builds (
  id            text PRIMARY KEY,
  org_id        text NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,
  app_id        text NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
  source_id     text NOT NULL REFERENCES build_sources(id) ON DELETE CASCADE,
  dockerfile    text,
  state         text NOT NULL CHECK (state IN ('queued', 'building', 'done', 'failed')),
  builder       text,
  image_digest  text,
  start_command text,
  internal_port integer,
  error         text,
  created_at    timestamptz NOT NULL DEFAULT now(),
  started_at    timestamptz,
  finished_at   timestamptz
);
CREATE INDEX builds_app ON builds (app_id, created_at DESC);
