/**
 * Marks the requests pier makes to itself for an MCP tool call (route-call.ts: `inject`;
 * exec-call.ts: a loopback WebSocket), so that a key bound to the MCP endpoint (an OAuth
 * access token, RFC 8707) is answered on the route a tool stands for and nowhere else.
 *
 * The mark is a header holding a secret drawn when this process starts: a client cannot
 * send it, since nothing outside this process ever learns it.
 */
import { randomBytes } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import { constantTimeEqual } from '../../crypto/tokens.js';

const HEADER = 'x-pier-mcp-call';
const SECRET = randomBytes(32).toString('base64url');

/** The header an MCP tool call adds to the request it makes to its route. */
export function mcpCallMark(): Record<string, string> {
  return { [HEADER]: SECRET };
}

/** Whether `req` is the MCP endpoint itself or a request made by one of its tool calls. */
export function isMcpRequest(req: FastifyRequest): boolean {
  if (req.routeOptions.url === '/v1/mcp') return true;
  const sent = req.headers[HEADER];
  return typeof sent === 'string' && constantTimeEqual(sent, SECRET);
}
