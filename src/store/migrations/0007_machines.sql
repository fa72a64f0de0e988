-- Machines (spec 2.11, 2.12): a row per machine of an app, with the state the platform
-- wants and the state it saw last, and usage events that billing prices later.

CREATE TABLE machines (
  id                text PRIMARY KEY,
  org_id            text NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,
  app_id            text NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
  host              text NOT NULL,
  region            text NOT NULL,
  config            jsonb NOT NULL,
  desired_state     text NOT NULL,
  observed_state    text NOT NULL,
  private_ip        text,
  boot_ms           integer,
  restarts          integer NOT NULL DEFAULT 0,
  volume_id         text REFERENCES volumes(id) ON DELETE SET NULL,
  create_error      text,
  create_error_code text,
  create_boot_log   text,
  create_warning    text,
  ready_at          timestamptz,
  -- Running time is booked up to here (usage events of kind machine_running_seconds).
  metered_at        timestamptz,
  created_at        timestamptz NOT NULL DEFAULT now(),
  updated_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX machines_app ON machines (app_id, created_at);
CREATE INDEX machines_org ON machines (org_id);

CREATE TABLE usage_events (
  id         bigserial PRIMARY KEY,
  org_id     text NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,
  kind       text NOT NULL,
  quantity   numeric NOT NULL,
  subject    text,
  at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX usage_events_org_at ON usage_events (org_id, at);
