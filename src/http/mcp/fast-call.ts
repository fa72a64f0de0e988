/**
 * The fast path of the MCP endpoint: a plain, well-formed 2026-07-28 `tools/call` of a
 * route tool, answered without the SDK's web `Request`/`Response`, its second
 * classification, its per-exchange transport and server. It answers exactly what the SDK
 * answers such a call (the same JSON, byte for byte, status and `Content-Type`), and the
 * tool runs as its route as on the SDK path (route-call.ts).
 *
 * The path is taken only when nothing the SDK checks could fail: the era is decided by
 * the SDK's own `classifyInboundRequest` (once per envelope); the standard headers must equal the body's
 * values exactly (no whitespace or Base64 forms to normalise); the message carries no
 * member the SDK might read; and the arguments pass the tool's input schema. Anything
 * else (`initialize`, `server/discover`, `tools/list`, other eras, malformed messages,
 * invalid arguments, `machine_exec`) goes to the SDK, which stays the one authority on
 * the protocol; a call the fast path takes would have been answered the same way there.
 */
import {
  classifyInboundRequest,
  isJsonContentType,
  SERVER_INFO_META_KEY,
  type CallToolResult,
} from '@modelcontextprotocol/server';
import type { IncomingHttpHeaders } from 'node:http';
import type { FastifyInstance } from 'fastify';
import { callRoute, routeRequest, type Caller } from './route-call.js';
import { MCP_SERVER_INFO } from './server.js';
import { TOOLS, type ToolRoute } from './tools.js';

/**
 * The revision the fast path answers; the SDK serves it (and exports no list of the
 * modern ones): a request naming any other goes to the SDK.
 */
const REVISION = '2026-07-28';

const ROUTE_TOOLS = new Map<string, ToolRoute>(TOOLS.map((tool) => [tool.name, tool]));

/** The members of a `tools/call` and of its params that the fast path knows all about. */
const MESSAGE_KEYS = new Set(['jsonrpc', 'id', 'method', 'params']);
const PARAMS_KEYS = new Set(['name', 'arguments', '_meta']);

const isPlainObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

const onlyKeys = (value: Record<string, unknown>, allowed: Set<string>): boolean =>
  Object.keys(value).every((key) => allowed.has(key));

const header = (headers: IncomingHttpHeaders, name: string): string | undefined => {
  const value = headers[name];
  return typeof value === 'string' ? value : undefined;
};

/**
 * Envelopes (`params._meta`, as JSON) the SDK classified as a 2026-07-28 request, with the
 * headers the fast path asks for. The SDK's classification of a message of the fast path's
 * shape reads nothing but the envelope and those headers (not the id, name or arguments),
 * and a client sends the same envelope on every call: it is classified once, not per call.
 * Bounded: past the limit the set starts again.
 */
const MODERN_ENVELOPES = new Set<string>();
const ENVELOPES_MAX = 1024;

function isModernCall(meta: unknown): boolean {
  const key = JSON.stringify(meta ?? null);
  if (MODERN_ENVELOPES.has(key)) return true;
  const route = classifyInboundRequest({
    httpMethod: 'POST',
    protocolVersionHeader: REVISION,
    mcpMethodHeader: 'tools/call',
    mcpNameHeader: undefined,
    body: { jsonrpc: '2.0', id: 0, method: 'tools/call', params: { _meta: meta } },
  });
  const modern =
    route.kind === 'modern' &&
    route.messageKind === 'request' &&
    route.classification.revision === REVISION;
  if (modern) {
    if (MODERN_ENVELOPES.size >= ENVELOPES_MAX) MODERN_ENVELOPES.clear();
    MODERN_ENVELOPES.add(key);
  }
  return modern;
}

/** A call the fast path answers: the tool, its validated input and the message's id. */
export interface FastToolCall {
  tool: ToolRoute;
  input: Record<string, unknown>;
  id: string | number;
}

/**
 * The call when `msg` (with its request headers) is one the fast path answers as the SDK
 * would; undefined sends it to the SDK.
 */
export function fastToolCall(headers: IncomingHttpHeaders, msg: unknown): FastToolCall | undefined {
  if (!isPlainObject(msg) || !onlyKeys(msg, MESSAGE_KEYS) || msg.method !== 'tools/call') return;
  if (msg.jsonrpc !== '2.0') return;
  const id = msg.id;
  if (typeof id !== 'string' && !Number.isSafeInteger(id)) return;
  const params = msg.params;
  if (!isPlainObject(params) || !onlyKeys(params, PARAMS_KEYS)) return;
  const tool = typeof params.name === 'string' ? ROUTE_TOOLS.get(params.name) : undefined;
  if (!tool || (params.arguments !== undefined && !isPlainObject(params.arguments))) return;
  if (!isJsonContentType(header(headers, 'content-type') ?? null)) return;

  // The SDK's header ladder, passed by equality: nothing left to strip or decode.
  const protocolVersionHeader = header(headers, 'mcp-protocol-version');
  if (protocolVersionHeader !== REVISION || header(headers, 'mcp-method') !== 'tools/call') return;
  if (header(headers, 'mcp-name') !== tool.name) return;
  if (!isModernCall(params._meta)) return;

  const parsed = tool.input.safeParse(params.arguments ?? {});
  if (!parsed.success) return; // the SDK words the tool error
  return { tool, input: parsed.data as Record<string, unknown>, id: id as string | number };
}

/**
 * Runs the call as its route and answers the JSON-RPC response the SDK would: the result
 * (or, when the tool throws, the SDK's tool error of its message) stamped with
 * `resultType` and the server's identity.
 */
export async function answerFastToolCall(
  app: FastifyInstance,
  caller: Caller,
  call: FastToolCall,
): Promise<string> {
  let result: CallToolResult;
  try {
    result = await callRoute(app, caller, routeRequest(call.tool, call.input));
  } catch (err) {
    result = {
      content: [{ type: 'text', text: err instanceof Error ? err.message : String(err) }],
      isError: true,
    };
  }
  // In the order the SDK's result schema gives its members (route results have no others).
  return JSON.stringify({
    result: {
      content: result.content,
      ...(result.isError === undefined ? {} : { isError: result.isError }),
      resultType: 'complete',
      _meta: { [SERVER_INFO_META_KEY]: MCP_SERVER_INFO },
    },
    jsonrpc: '2.0',
    id: call.id,
  });
}
