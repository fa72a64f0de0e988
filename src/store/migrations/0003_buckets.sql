-- Buckets: metadata in PostgreSQL, bytes in the blob store (filesystem or S3) under
-- random blob ids, so no object key ever becomes a file path.

CREATE TABLE buckets (
  id          text PRIMARY KEY,
  org_id      text NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,
  name        text NOT NULL UNIQUE REFERENCES names(name),
  backend_ref text NOT NULL,
  cors        jsonb NOT NULL DEFAULT '[]',
  created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX buckets_org ON buckets (org_id, name);

-- Keys sort in byte order (COLLATE "C"), as S3 lists them.
CREATE TABLE objects (
  bucket_id     text NOT NULL REFERENCES buckets(id) ON DELETE CASCADE,
  key           text COLLATE "C" NOT NULL,
  blob_id       text NOT NULL,
  size          bigint NOT NULL,
  etag          text NOT NULL,
  content_type  text,
  metadata      jsonb NOT NULL DEFAULT '{}',
  last_modified timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (bucket_id, key)
);

CREATE TABLE multipart_uploads (
  id           text PRIMARY KEY,
  bucket_id    text NOT NULL REFERENCES buckets(id) ON DELETE CASCADE,
  key          text COLLATE "C" NOT NULL,
  content_type text,
  metadata     jsonb NOT NULL DEFAULT '{}',
  created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX multipart_uploads_bucket ON multipart_uploads (bucket_id, key);

CREATE TABLE multipart_parts (
  upload_id     text NOT NULL REFERENCES multipart_uploads(id) ON DELETE CASCADE,
  part_number   integer NOT NULL CHECK (part_number BETWEEN 1 AND 10000),
  blob_id       text NOT NULL,
  size          bigint NOT NULL,
  etag          text NOT NULL,
  last_modified timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (upload_id, part_number)
);

-- S3 access keys: the secret must be readable to check HMAC signatures, so it is sealed
-- with the master key rather than hashed. Every key reaches exactly one bucket.
CREATE TABLE s3_keys (
  id                text PRIMARY KEY,
  org_id            text NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,
  bucket_id         text NOT NULL REFERENCES buckets(id) ON DELETE CASCADE,
  purpose           text NOT NULL CHECK (purpose IN ('presign', 'attachment', 'person')),
  secret_nonce      bytea NOT NULL,
  secret_ciphertext bytea NOT NULL,
  created_at        timestamptz NOT NULL DEFAULT now(),
  revoked_at        timestamptz
);
CREATE INDEX s3_keys_bucket ON s3_keys (bucket_id);

CREATE TABLE bucket_attachments (
  app_id     text NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
  bucket_id  text NOT NULL REFERENCES buckets(id) ON DELETE CASCADE,
  prefix     text NOT NULL,
  key_id     text NOT NULL REFERENCES s3_keys(id),
  injected   text[] NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (app_id, bucket_id)
);
