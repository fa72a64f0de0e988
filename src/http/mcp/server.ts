/**
 * The MCP server of one request: a fresh `McpServer` (the SDK builds one per HTTP
 * request; nothing is kept between requests) with every tool of tools.ts, each run as
 * its `/v1` route on behalf of the caller the request carries.
 */
import type { FastifyInstance } from 'fastify';
import { McpServer, type McpRequestContext } from '@modelcontextprotocol/server';
import { z } from 'zod';
import { callExec, type ExecInput } from './exec-call.js';
import { callRoute, routeRequest, type Caller } from './route-call.js';
import { EXEC_ROUTE, TOOLS } from './tools.js';

export const MCP_SERVER_INFO = { name: 'pier', version: '1' };

const INSTRUCTIONS =
  'Operate a pier organization: apps, machines, databases, volumes, buckets, secrets, billing and the agent audit. Every tool is one /v1 route of the control API (named in its description) and answers what that route answers.';

export function mcpServerFactory(app: FastifyInstance) {
  return (ctx: McpRequestContext): McpServer => {
    const caller = ctx.authInfo?.extra?.caller as Caller;
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
        (input: Record<string, unknown>) => callRoute(app, caller, routeRequest(tool, input)),
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
      (input: ExecInput) => callExec(app, caller, input),
    );
    return server;
  };
}
