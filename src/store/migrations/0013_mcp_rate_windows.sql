-- Tool calls through /v1/mcp, counted per organization and fixed one-minute window
-- (spec 8: 120 per minute per organization), in the shared database so that every
-- replica counts against the same limit (services/mcp-rate-limit.ts).

CREATE TABLE mcp_rate_windows (
  org_id       text        NOT NULL,
  window_start timestamptz NOT NULL,
  calls        integer     NOT NULL,
  PRIMARY KEY (org_id, window_start)
);
