-- Shell sessions into machines (spec 4.9 exec, 7.6): every session is audited here
-- before it opens (who, which machine, what command), and closed with how it ended.
-- Open rows (ended_at NULL) are the machine's sessions: the per-machine cap counts them.

CREATE TABLE exec_sessions (
  id          text PRIMARY KEY,
  org_id      text NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,
  machine_id  text NOT NULL REFERENCES machines(id) ON DELETE CASCADE,
  key_id      text NOT NULL,
  agent       boolean NOT NULL,
  -- The argv, or NULL for an interactive shell.
  command     jsonb,
  tty         boolean NOT NULL,
  client_ip   text,
  host        text NOT NULL,
  -- The session's process on the host, by pid and start time (so a restart can end it).
  pid         integer,
  pid_start   bigint,
  started_at  timestamptz NOT NULL DEFAULT now(),
  ended_at    timestamptz,
  exit_code   integer,
  exit_signal text,
  end_reason  text
);
CREATE INDEX exec_sessions_open ON exec_sessions (machine_id) WHERE ended_at IS NULL;
CREATE INDEX exec_sessions_org ON exec_sessions (org_id, started_at);
