/** `pier mcp`: the configuration it prints connects a real MCP client. */
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';
import { runCli, tempDir } from '../cli/run-cli.js';

let tp: TestPlatform;
let org: TestOrg;
let tmp: Awaited<ReturnType<typeof tempDir>>;
let pier: (...args: string[]) => ReturnType<typeof runCli>;

beforeAll(async () => {
  tp = await startTestPlatform();
  org = await tp.createOrg();
  tmp = await tempDir();
  const env = {
    PIER_CONFIG: path.join(tmp.dir, 'config.json'),
    PIER_API_URL: tp.url,
    PIER_API_KEY: org.token,
  };
  pier = (...args) => runCli(args, { env });
});
afterAll(async () => {
  await tp?.close();
  await tmp?.remove();
});

it('prints the URL and how to authorize, never the CLI’s own key', async () => {
  const res = await pier('mcp');
  expect(res.code).toBe(0);
  expect(res.stdout).toContain(`${tp.url}/v1/mcp`);
  expect(res.stdout).toContain('pier tokens create');
  expect(res.stdout).toContain('Bearer <agent token>');
  expect(res.stdout).toContain(`${tp.url}/.well-known/oauth-authorization-server`);
  expect(res.stdout).not.toContain(org.token);
});

it('gives a configuration a desktop client connects with', async () => {
  const made = await pier(
    'tokens',
    'create',
    '--name',
    'desktop agent',
    '--agent-class',
    'production',
    '--json',
  );
  expect(made.code).toBe(0);
  const token = (JSON.parse(made.stdout) as { token: string }).token;
  const printed = await pier('mcp', '--token', token, '--json');
  expect(printed.code).toBe(0);
  const server = (
    JSON.parse(printed.stdout) as {
      mcpServers: { pier: { url: string; headers: Record<string, string> } };
    }
  ).mcpServers.pier;

  const client = new Client({ name: 'desktop', version: '1' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(server.url), {
      requestInit: { headers: server.headers },
    }),
  );
  try {
    const apps = await client.callTool({ name: 'apps_list', arguments: {} });
    expect(apps.isError).toBeFalsy();
    const write = await client.callTool({ name: 'app_create', arguments: { name: 'nope' } });
    expect(JSON.stringify(write.content)).toContain('agent-token-production-readonly');
  } finally {
    await client.close();
  }
});
