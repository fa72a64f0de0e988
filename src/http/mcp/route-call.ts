/**
 * Runs one MCP tool as the `/v1` route it stands for: an in-process request through
 * Fastify's router (inner-request.ts) carrying the caller's own Authorization (and organization header), so the
 * route's auth row, the agent judge and its audit row, validation and errors are exactly
 * those of a direct call. The route's answer becomes the tool's result; a refusal becomes
 * a result with `isError: true` carrying the route's status, `code` and sentence.
 */
import type { FastifyInstance } from 'fastify';
import type { CallToolResult } from '@modelcontextprotocol/server';
import type { RawBody, ToolRoute } from './tools.js';
import { mcpCallMark } from '../plugins/inner-calls.js';
import { innerRequest } from './inner-request.js';

/** What the MCP request forwards to the route it calls. */
export interface Caller {
  authorization: string;
  orgHeader?: string;
  requestId: string;
}

export interface RouteRequest {
  method: string;
  url: string;
  body?: unknown;
  /** A body of raw bytes instead of JSON (a source upload: source-upload.ts). */
  raw?: RawBody;
}

/** Fills the tool's route from its input: path parameters, query string, body. */
export function routeRequest(tool: ToolRoute, input: Record<string, unknown>): RouteRequest {
  const [method, template] = tool.route.split(' ') as [string, string];
  const used = new Set<string>();
  const path = template.replace(/:(\w+)/g, (_, param: string) => {
    const field = tool.params?.[param] ?? param;
    used.add(field);
    return encodeURIComponent(String(input[field] ?? ''));
  });
  const query = new URLSearchParams();
  for (const field of tool.query ?? []) {
    used.add(field);
    if (input[field] !== undefined) query.set(field, String(input[field]));
  }
  let body: unknown;
  if (tool.bodyField) {
    body = input[tool.bodyField];
  } else if (method !== 'GET' && method !== 'DELETE') {
    body = Object.fromEntries(Object.entries(input).filter(([k]) => !used.has(k)));
  }
  const qs = query.toString();
  const url = qs ? `${path}?${qs}` : path;
  if (tool.rawBody) return { method, url, raw: tool.rawBody(input) };
  return { method, url, body };
}

export async function callRoute(
  app: FastifyInstance,
  caller: Caller,
  req: RouteRequest,
): Promise<CallToolResult> {
  const headers: Record<string, string> = {
    authorization: caller.authorization,
    // The audit row of an agent's call carries the MCP request's id.
    'x-request-id': caller.requestId,
    ...mcpCallMark(),
  };
  if (caller.orgHeader) headers['x-platform-org'] = caller.orgHeader;
  let payload: string | Buffer | undefined;
  if (req.raw) {
    headers['content-type'] = req.raw.contentType;
    payload = req.raw.bytes;
  } else if (req.body !== undefined) {
    headers['content-type'] = 'application/json';
    payload = JSON.stringify(req.body);
  }
  const res = await innerRequest(app, req.method, req.url, headers, payload);
  if (res.statusCode >= 400) return routeErrorResult(res.statusCode, res.body);
  const text = res.body.length > 0 ? res.body : JSON.stringify({ status: res.statusCode });
  return { content: [{ type: 'text', text }] };
}

/** A route's refusal as a tool result: `{status, code, error, issues?}`, `isError: true`. */
export function routeErrorResult(status: number, body: string): CallToolResult {
  let answer: Record<string, unknown>;
  try {
    answer = { status, ...(JSON.parse(body) as Record<string, unknown>) };
  } catch {
    answer = { status, error: body };
  }
  return { isError: true, content: [{ type: 'text', text: JSON.stringify(answer) }] };
}
