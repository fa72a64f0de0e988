/** `pier tokens list|create|revoke`: the organization's API keys (spec 2.1, 4.1). */
import { type Command, InvalidArgumentError } from 'commander';
import { apiPath } from './api-client.js';
import { type CommonOptions, collect, connect, withCommonOptions } from './connect.js';
import { CliError, action } from './errors.js';
import { printJson, printTable, say, when } from './output.js';
import type { AgentBlock, CreatedToken, TokenRecord } from './types.js';

const AGENT_CLASSES = ['sandbox', 'twin', 'production'] as const;

interface CreateOptions extends CommonOptions {
  name: string;
  scope?: string[];
  ttl?: number;
  expiresAt?: string;
  agentClass?: AgentBlock['class'];
  agentApp?: string[];
  prodDataRead?: boolean;
}

/** Registers `pier tokens`. */
export function registerTokens(program: Command): void {
  const tokens = program.command('tokens').description('API keys of the organization');

  withCommonOptions(
    tokens.command('list').description('list API keys (never their values)'),
  ).action(
    action(async (opts: CommonOptions) => {
      const list = await (await connect(opts)).call<TokenRecord[]>('GET', '/v1/tokens');
      if (opts.json) return printJson(list);
      printTable(
        ['ID', 'NAME', 'PREFIX', 'ACCESS', 'EXPIRES', 'LAST USED', 'CREATED'],
        list.map((t) => [
          t.id,
          t.name,
          t.prefix,
          access(t),
          t.expired ? 'expired' : t.expiresAt ? when(t.expiresAt) : 'never',
          when(t.lastUsedAt),
          when(t.createdAt),
        ]),
        'No API keys.',
      );
    }),
  );

  withCommonOptions(tokens.command('create').description('create an API key; shown only once'))
    .requiredOption('--name <name>', 'what the key is for (1-120 characters)')
    .option(
      '--scope <scope>',
      'limit the key: read, deploy, deploy:<app>, mail:send[:<domain>]; repeatable',
      collect,
    )
    .option('--ttl <seconds>', 'expire after this many seconds (60-31536000)', seconds)
    .option('--expires-at <iso>', 'expire at this moment (ISO 8601)')
    .option(
      '--agent-class <class>',
      'make it an agent token: sandbox, twin or production',
      agentClass,
    )
    .option(
      '--agent-app <app>',
      'app the agent token may touch; repeatable (default: all)',
      collect,
    )
    .option('--prod-data-read', 'production agent token may read data production holds')
    .action(
      action(async (opts: CreateOptions) => {
        const created = await (
          await connect(opts)
        ).call<CreatedToken>('POST', '/v1/tokens', createBody(opts));
        if (opts.json) return printJson(created);
        say(
          `Created API key ${created.name} (${created.id}), ${access(created)} access` +
            (created.expiresAt ? `, expires ${when(created.expiresAt)}.` : '.'),
          'This is the only time the key is shown; store it now:',
          '',
          `  ${created.token}`,
          '',
        );
      }),
    );

  withCommonOptions(tokens.command('revoke').description('revoke an API key at once'), {
    json: false,
  })
    .argument('<id>', 'key id (tok-...)')
    .action(
      action(async (id: string, opts: CommonOptions) => {
        await (await connect(opts)).call('DELETE', apiPath`/v1/tokens/${id}`);
        say(`Revoked API key ${id}.`);
      }),
    );
}

/** The CreateToken body (spec 4.1) from the flags; the server checks the values. */
function createBody(opts: CreateOptions): Record<string, unknown> {
  const body: Record<string, unknown> = { name: opts.name };
  const apps = opts.agentApp ?? [];
  if (opts.scope) body.scopes = opts.scope;
  if (opts.ttl !== undefined) body.ttlSeconds = opts.ttl;
  if (opts.expiresAt !== undefined) body.expiresAt = opts.expiresAt;
  if (opts.agentClass) {
    const agent: AgentBlock = { class: opts.agentClass };
    if (apps.length > 0) agent.apps = apps;
    if (opts.prodDataRead) agent.prodDataRead = true;
    body.agent = agent;
  } else if (apps.length > 0 || opts.prodDataRead) {
    throw new CliError('--agent-app and --prod-data-read need --agent-class');
  }
  return body;
}

/** What a key may do, in one short cell. */
function access(t: TokenRecord): string {
  const scope = t.scopes ? t.scopes.join(',') || 'none' : 'full';
  if (!t.agent) return scope;
  const apps = t.agent.apps ? ` ${t.agent.apps.join(',')}` : '';
  const data = t.agent.prodDataRead ? ' +data' : '';
  return `${scope} agent:${t.agent.class}${apps}${data}`;
}

function seconds(value: string): number {
  if (!/^\d+$/.test(value)) throw new InvalidArgumentError('give a whole number of seconds.');
  return Number(value);
}

function agentClass(value: string): AgentBlock['class'] {
  const found = AGENT_CLASSES.find((c) => c === value);
  if (!found) throw new InvalidArgumentError(`use one of ${AGENT_CLASSES.join(', ')}.`);
  return found;
}
