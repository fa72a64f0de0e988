/**
 * The requests pier makes to itself.
 *
 * The console's (console/api.ts) go through `inject`, whose URL parser resolves `.` and
 * `..` segments; `innerUrl` is the app's `rewriteUrl` and routes them by the URL as
 * written instead, as a client's raw request line would be routed.
 *
 * An MCP tool call's are marked (route-call.ts: `inject`;
 * exec-call.ts: a loopback WebSocket), so that a key bound to the MCP endpoint (an OAuth
 * access token, RFC 8707) is answered on the route a tool stands for and nowhere else.
 *
 * The mark is a header holding a secret drawn when this process starts: a client cannot
 * send it, since nothing outside this process ever learns it.
 */
import { randomBytes } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { FastifyRequest } from 'fastify';
import { INNER_URL_HEADER } from '../../console/api.js';
import { constantTimeEqual } from '../../crypto/tokens.js';

/**
 * The URL to route `req` by: the console's URL as written when inject sent it, else the
 * request's own. The written URL is taken only from an injected request (no socket can
 * carry `isLightMyRequest`) and only when it resolves to the URL inject made of it: it can
 * undo the resolution of dot segments, never name another route.
 */
export function innerUrl(req: IncomingMessage): string {
  const url = req.url ?? '/';
  const written = req.headers[INNER_URL_HEADER];
  if (typeof written !== 'string') return url;
  delete req.headers[INNER_URL_HEADER];
  if (!(req as { isLightMyRequest?: boolean }).isLightMyRequest) return url;
  let resolved: URL;
  try {
    resolved = new URL(written, 'http://localhost');
  } catch {
    return url;
  }
  return /^\/(?!\/)/.test(written) && resolved.pathname + resolved.search === url ? written : url;
}

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
