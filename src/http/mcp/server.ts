/**
 * The MCP servers: `McpServer`s with every tool of tools.ts, each run as its `/v1` route
 * on behalf of the caller of the exchange it serves.
 *
 * Building one registers ~40 tools and converts their schemas on first use, which cost
 * more than the tool call itself; so a server is not thrown away after its exchange but
 * kept for the next one (one pool per protocol era: the SDK seeds a server with an era's
 * handlers). Nothing of a caller stays in it: the tools read the caller from the
 * exchange's own context (`ctx.http.authInfo`), and the SDK seeds the protocol version
 * and client identity afresh on every exchange. A server serves one exchange at a time
 * (the SDK refuses one still connected); it goes back to its pool when its transport
 * closes, and a server whose exchange never connected is simply dropped.
 */
import type { FastifyInstance } from 'fastify';
import {
  McpServer,
  type McpRequestContext,
  type McpServerFactory,
  type ServerContext,
} from '@modelcontextprotocol/server';
import { z } from 'zod';
import { callExec, type ExecInput } from './exec-call.js';
import { callRoute, routeRequest, type Caller } from './route-call.js';
import { EXEC_ROUTE, TOOLS } from './tools.js';

export const MCP_SERVER_INFO = { name: 'pier', version: '1' };

const INSTRUCTIONS =
  'Operate a pier organization: apps, machines, builds and deploys (upload code, build, deploy, roll back), databases, volumes, buckets, secrets, billing and the agent audit. Every tool is one /v1 route of the control API (named in its description) and answers what that route answers.';

/** Idle servers kept per era; more are built when more exchanges run at once. */
const POOL_MAX = 64;

/** The caller mcp.ts put into the exchange's auth info. */
function callerOf(ctx: ServerContext): Caller {
  const caller = ctx.http?.authInfo?.extra?.caller as Caller | undefined;
  // Every exchange carries one (mcp.ts); without it no route could be called as anyone.
  if (!caller) throw new Error('MCP exchange without a caller');
  return caller;
}

function buildServer(app: FastifyInstance): McpServer {
  const server = new McpServer(MCP_SERVER_INFO, { instructions: INSTRUCTIONS });
  for (const tool of TOOLS) {
    const method = tool.route.split(' ')[0];
    server.registerTool(
      tool.name,
      {
        description: `${tool.description} (route: ${tool.route})`,
        inputSchema: tool.input,
        annotations: {
          readOnlyHint: method === 'GET',
          destructiveHint: method === 'DELETE' || tool.name === 'machine_action',
        },
        _meta: { 'dev.pier/route': tool.route },
      },
      (input: Record<string, unknown>, ctx) =>
        callRoute(app, callerOf(ctx), routeRequest(tool, input)),
    );
  }
  server.registerTool(
    'machine_exec',
    {
      description: `Run one command in a running machine (no terminal, stdin closed) and answer its exit code, stdout and stderr (each up to 256 KiB). (route: ${EXEC_ROUTE}, the shell session)`,
      inputSchema: z.object({
        id: z.string().min(1).max(64).describe('The machine’s id.'),
        command: z.array(z.string().min(1).max(8192)).min(1).max(256).describe('The argv.'),
        timeoutS: z.number().int().min(1).max(300).optional().describe('Default 60.'),
      }),
      annotations: { readOnlyHint: false, destructiveHint: true },
      _meta: { 'dev.pier/route': EXEC_ROUTE },
    },
    (input: ExecInput, ctx) => callExec(app, callerOf(ctx), input),
  );
  return server;
}

/** The factory the SDK asks for a server per exchange: an idle one of the era, or a new one. */
export function mcpServerFactory(app: FastifyInstance): McpServerFactory {
  const idle = { modern: new Set<McpServer>(), legacy: new Set<McpServer>() };
  return (ctx: McpRequestContext): McpServer => {
    const pool = idle[ctx.era];
    for (const server of pool) {
      pool.delete(server);
      if (!server.isConnected()) return server;
    }
    const server = buildServer(app);
    // The SDK wraps onclose for the length of an exchange and puts this one back after.
    server.server.onclose = () => {
      if (pool.size < POOL_MAX) pool.add(server);
    };
    return server;
  };
}
