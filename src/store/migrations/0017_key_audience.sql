-- The one route a key answers on, when it is not every route: 'mcp' for the access tokens
-- OAuth issues to MCP clients (RFC 8707: their resource is /v1/mcp), which the tool calls
-- then carry to the routes they stand for. NULL for every other key.
ALTER TABLE api_keys ADD COLUMN audience text CHECK (audience IN ('mcp'));
