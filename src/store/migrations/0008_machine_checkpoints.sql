-- Machine checkpoints (spec 4.9, 2.11 checkpointAt, 2.12 checkpointIntervalS): named disk
-- snapshots of a machine's writable layer. The label is the customer's name for one;
-- `seq` (a per-machine number never reused) names its volume on the host, so a label
-- never reaches the storage pool. A row is `creating` until its snapshot exists, which
-- reserves the label; a `creating` row left by a crash is swept with its volume.

ALTER TABLE machines ADD COLUMN checkpoint_at timestamptz;
ALTER TABLE machines ADD COLUMN checkpoint_seq integer NOT NULL DEFAULT 0;

CREATE TABLE machine_checkpoints (
  id          text PRIMARY KEY,
  machine_id  text NOT NULL REFERENCES machines(id) ON DELETE CASCADE,
  org_id      text NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,
  label       text NOT NULL,
  seq         integer NOT NULL,
  -- taken by the platform every checkpointIntervalS (listed only with auto=1)
  auto        boolean NOT NULL DEFAULT false,
  memory      boolean NOT NULL DEFAULT false,
  state       text NOT NULL DEFAULT 'creating' CHECK (state IN ('creating', 'ready')),
  size_bytes  bigint,
  created_at  timestamptz NOT NULL DEFAULT now(),
  UNIQUE (machine_id, label),
  UNIQUE (machine_id, seq)
);
CREATE INDEX machine_checkpoints_machine ON machine_checkpoints (machine_id, created_at);
