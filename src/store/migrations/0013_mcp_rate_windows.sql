-- Tool calls through /v1/mcp, counted per organization and fixed one-minute window
-- (spec 8: 120 per minute per organization), in the shared database so that every
-- replica counts against the same limit (services/mcp-rate-limit.ts). UNLOGGED: a count
-- is not worth a WAL flush per tool call, and a crash that loses it only opens a fresh
-- window.

CREATE UNLOGGED TABLE mcp_rate_windows (
  org_id       text        NOT NULL,
  window_start timestamptz NOT NULL,
  calls        integer     NOT NULL,
  PRIMARY KEY (org_id, window_start)
);
