/**
 * The MCP endpoint (spec 4.12, 9.3): `POST /v1/mcp`, one JSON-RPC message per POST, no
 * sessions. The official SDK (mcp/handler.ts) speaks the protocol: revision
 * 2026-07-28 (`server/discover`, the `_meta` protocol version, the `Mcp-Method` /
 * `Mcp-Name` header checks) and the 2025 revisions (`initialize`) served statelessly; a
 * plain 2026-07-28 `tools/call` is answered as the SDK would answer it, without it
 * (mcp/fast-call.ts).
 * In front of it sit pier's own checks: the bearer key (the auth row: F, agent tokens
 * judged per tool by the route the tool runs as), the browser Origin, and the limit of
 * 120 tool calls per minute per organization, shared in PostgreSQL through leases.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ApiError } from '../../../errors/api-error.js';
import { mcpChallengeOf } from '../../../oauth/urls.js';
import { countMcpToolCall } from '../../../services/mcp-rate-limit.js';
import type { AppDeps } from '../../deps.js';
import type { McpHandler } from '../../mcp/handler.js';
import type { Caller } from '../../mcp/route-call.js';
import { principalOf } from '../../plugins/auth.js';

/** Headers of the Node request that do not describe the message itself. */
const HOP_HEADERS = new Set(['host', 'connection', 'content-length', 'transfer-encoding']);

/** The body parsed as JSON, or undefined when it is not (the SDK answers that itself). */
function parsed(body: string): unknown {
  try {
    return JSON.parse(body) as unknown;
  } catch {
    return undefined;
  }
}

/** Whether the message is a `tools/call` request: only those count against the limit. */
function isToolCall(msg: unknown): boolean {
  const m = msg as { method?: unknown; id?: unknown } | null | undefined;
  return m?.method === 'tools/call' && m.id !== undefined;
}

/**
 * One message per POST (spec 4.12): the SDK's 2025 leg would run a JSON-RPC batch, which
 * would also carry any number of tool calls past the limit.
 */
const BATCH_REFUSED = {
  jsonrpc: '2.0',
  id: null,
  error: {
    code: -32600,
    message: 'Invalid Request: send one JSON-RPC message per POST; batches are not accepted.',
  },
};

function webHeaders(req: FastifyRequest): Headers {
  const headers = new Headers();
  for (const [k, v] of Object.entries(req.headers)) {
    if (v === undefined || HOP_HEADERS.has(k)) continue;
    headers.set(k, Array.isArray(v) ? v.join(', ') : v);
  }
  return headers;
}

type McpModules = typeof import('../../mcp/fast-call.js') &
  typeof import('../../mcp/handler.js') &
  typeof import('../../mcp/server.js');

async function loadMcpModules(): Promise<McpModules> {
  const [fast, handler, server] = await Promise.all([
    import('../../mcp/fast-call.js'),
    import('../../mcp/handler.js'),
    import('../../mcp/server.js'),
  ]);
  return { ...fast, ...handler, ...server };
}

export function mcpRoutes(root: FastifyInstance, { ctx, config }: AppDeps): void {
  // Made on the first call: registering the routes reads nothing of the configuration
  // (the contracts test registers them without one).
  let handler: McpHandler | undefined;
  const handlerOf = () =>
    (handler ??= mcp.mcpHandler(mcp.mcpServerFactory(root), config.bodyLimitBytes));
  root.addHook('onClose', async () => handler?.close());
  // The SDK and the modules on it, loaded by the first MCP request: importing them costs
  // about half a second of CPU, which every `pier` start (and test file) would pay.
  let loading: Promise<McpModules> | undefined;
  let mcp!: McpModules;
  // The origin of the public URL, parsed again only when the URL changes.
  let known = { url: '', origin: '' };
  const originOf = (url: string) =>
    known.url === url ? known.origin : (known = { url, origin: new URL(url).origin }).origin;

  // A 401 tells an OAuth client where to log in (RFC 9728 5.1): resource_metadata, and
  // invalid_token when the bearer it sent is unknown, revoked or expired.
  // Callback style: it runs on every answer, and a promise each would show.
  const challenge = (
    req: FastifyRequest,
    reply: FastifyReply,
    payload: unknown,
    done: (err: null, payload: unknown) => void,
  ) => {
    if (reply.statusCode === 401) {
      const sent = req.headers.authorization !== undefined;
      reply.header('www-authenticate', mcpChallengeOf(config.publicUrl, sent));
    }
    done(null, payload);
  };

  void root.register(async (app) => {
    // The SDK reads the body itself: a malformed message is its JSON-RPC parse error,
    // and a body that is not JSON its 415, not the API's generic 400.
    app.removeAllContentTypeParsers();
    app.addContentTypeParser('*', { parseAs: 'string' }, (_req, body, done) => done(null, body));

    app.post(
      '/v1/mcp',
      {
        config: { auth: { access: ['F'], agentJudgedBy: 'tool' } },
        schema: { tags: ['mcp'], summary: 'The MCP endpoint: one JSON-RPC message per POST' },
        onSend: challenge,
      },
      async (req, reply) => {
        // Read per request: a listener on port 0 learns its public URL after the app is built.
        const ownOrigin = originOf(config.publicUrl);
        const origin = req.headers.origin;
        // A browser page of another site must not drive a signed-in person's key (DNS
        // rebinding, cross-site posts); desktop clients send no Origin at all.
        if (origin !== undefined && origin !== ownOrigin) {
          throw new ApiError(
            'forbidden',
            `Requests from the browser origin '${origin}' are refused; only ${ownOrigin} may call the MCP endpoint from a browser.`,
          );
        }
        mcp ??= await (loading ??= loadMcpModules());
        const p = principalOf(req);
        const body = typeof req.body === 'string' ? req.body : '';
        const msg = parsed(body);
        if (Array.isArray(msg)) return reply.code(400).send(BATCH_REFUSED);
        if (isToolCall(msg)) {
          // Most calls take a place this replica already leased: no promise to wait on.
          const counting = countMcpToolCall(ctx.db, p.orgId, ctx.clock());
          if (counting) await counting;
        }

        const caller: Caller = {
          authorization: req.headers.authorization!,
          orgHeader: req.headers['x-platform-org'] as string | undefined,
          requestId: req.id,
        };
        // A plain tools/call skips the SDK's web objects and per-exchange server.
        const fast = mcp.fastToolCall(req.headers, msg);
        if (fast) {
          reply.header('content-type', 'application/json');
          return reply.send(await mcp.answerFastToolCall(root, caller, fast));
        }
        // A parsed message goes to the SDK as `parsedBody`, which it then never reads from
        // the request: a request without a body spares building and reading a stream.
        const request = new Request(`${ownOrigin}/v1/mcp`, {
          method: 'POST',
          headers: webHeaders(req),
          ...(msg === undefined ? { body } : {}),
        });
        const res = await handlerOf().fetch(request, {
          authInfo: { token: '', clientId: p.key.id, scopes: [], extra: { caller } },
          // Parsed once here; a body that is not JSON is left to the SDK's parse error.
          ...(msg === undefined ? {} : { parsedBody: msg }),
        });
        reply.code(res.status);
        res.headers.forEach((value, key) => void reply.header(key, value));
        const text = await res.text();
        return reply.send(text.length > 0 ? text : undefined);
      },
    );

    // Stateless: no stream to open (GET) and no session to end (DELETE).
    app.route({
      method: ['GET', 'PUT', 'PATCH', 'DELETE'],
      url: '/v1/mcp',
      config: { auth: 'public' },
      schema: { hide: true },
      handler: async (_req, reply) => {
        reply.header('allow', 'POST');
        throw new ApiError(
          'method-not-allowed',
          'The MCP endpoint takes one JSON-RPC message per POST; there are no sessions or streams.',
        );
      },
    });
  });
}
