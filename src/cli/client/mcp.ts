/**
 * `pier mcp`: what a desktop MCP client needs to reach this platform's `/v1/mcp` — the
 * URL and the Authorization header of an agent token. It mints nothing and never prints
 * the CLI's own key: an agent should hold a key of its own, judged and audited as an agent
 * (`pier tokens create --agent-class …`), which the person can revoke at any time. A
 * client that speaks OAuth needs only the URL (the console's consent page does the rest).
 */
import type { Command } from 'commander';
import { resolveSettings } from './config-file.js';
import { withCommonOptions, type CommonOptions } from './connect.js';
import { action } from './errors.js';
import { printJson, say } from './output.js';

interface McpOptions extends CommonOptions {
  token?: string;
}

const PLACEHOLDER = '<agent token>';

/** The `mcpServers` entry most desktop clients read (Cursor, VS Code, Claude Code, …). */
export function mcpClientConfig(apiUrl: string, token: string = PLACEHOLDER) {
  return {
    mcpServers: {
      pier: {
        type: 'http',
        url: `${apiUrl}/v1/mcp`,
        headers: { Authorization: `Bearer ${token}` },
      },
    },
  };
}

export function registerMcp(program: Command): void {
  withCommonOptions(
    program
      .command('mcp')
      .description('print the configuration a desktop MCP client needs to reach /v1/mcp'),
  )
    .option('--token <token>', 'the agent token to put in the configuration')
    .action(
      action(async (opts: McpOptions) => {
        const { apiUrl } = await resolveSettings(opts);
        const config = mcpClientConfig(apiUrl, opts.token);
        if (opts.json) return printJson(config);
        say(
          `MCP endpoint: ${apiUrl}/v1/mcp (protocol 2026-07-28; 2025 clients are served too)`,
          '',
          'Authorize with an agent token of its own, judged and audited on every tool call:',
          '  pier tokens create --name my-agent --agent-class production   # read-only',
          '  (sandbox or twin may also write; --agent-app <app> limits it to some apps;',
          '   --prod-data-read lets a production agent read data production holds)',
          '',
          'Then put this into the client’s MCP configuration' +
            (opts.token ? ':' : `, with the token in place of ${PLACEHOLDER}:`),
          '',
          JSON.stringify(config, null, 2),
          '',
          'A client that speaks OAuth 2.1 (most desktop and hosted ones) needs only the URL:',
          'it registers itself and sends you to the console to choose what it may do',
          `(${apiUrl}/.well-known/oauth-authorization-server).`,
          `Grants it holds: ${apiUrl}/console/oauth/grants.`,
        );
      }),
    );
}
