import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';
import { runCli, tempDir } from './run-cli.js';

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

describe('pier tokens', () => {
  it('creates a key, shows it once, and the key works', async () => {
    const res = await pier(
      'tokens',
      'create',
      '--name',
      'ci deploy',
      '--scope',
      'read',
      '--ttl',
      '3600',
    );
    expect(res.stderr).toBe('');
    expect(res.code).toBe(0);
    const token = /^ {2}(pier_\S+)$/m.exec(res.stdout)?.[1];
    expect(token).toBeDefined();
    expect(res.stdout).toMatch(/only time the key is shown/);
    expect(res.stdout).toMatch(/Created API key ci deploy \(tok-\S+\), read access, expires /);
    const apps = await tp.request('GET', '/v1/apps', { token });
    expect(apps.status).toBe(200);
  });

  it('creates an agent token with --json', async () => {
    const res = await pier(
      'tokens',
      'create',
      '--json',
      '--name',
      'bot',
      '--agent-class',
      'production',
      '--agent-app',
      'web',
      '--agent-app',
      'api-two',
      '--prod-data-read',
    );
    expect(res.code).toBe(0);
    const body = JSON.parse(res.stdout);
    expect(body).toMatchObject({
      name: 'bot',
      token: expect.stringMatching(/^pier_/),
      agent: { class: 'production', apps: ['web', 'api-two'], prodDataRead: true },
    });
  });

  it('refuses agent options without a class, locally', async () => {
    const res = await pier('tokens', 'create', '--name', 'x', '--agent-app', 'web');
    expect(res.code).toBe(1);
    expect(res.stderr).toBe('pier: --agent-app and --prod-data-read need --agent-class\n');
  });

  it('lists keys as JSON (no values) and as a table', async () => {
    const json = await pier('tokens', 'list', '--json');
    expect(json.code).toBe(0);
    const list = JSON.parse(json.stdout) as { name: string; token?: string }[];
    expect(list.map((t) => t.name)).toEqual(expect.arrayContaining(['ci deploy', 'bot']));
    expect(list.every((t) => t.token === undefined)).toBe(true);
    expect(json.stdout).not.toMatch(/pier_[A-Za-z0-9]{43}/);

    const table = await pier('tokens', 'list');
    expect(table.code).toBe(0);
    const [header, ...rows] = table.stdout.trimEnd().split('\n');
    expect(header).toMatch(/^ID\s+NAME\s+PREFIX\s+ACCESS\s+EXPIRES\s+LAST USED\s+CREATED$/);
    expect(rows).toHaveLength(list.length);
    const ci = rows.find((r) => r.includes('ci deploy'));
    expect(ci).toMatch(/^tok-\S+\s+ci deploy\s+pier_\S+\s+read\s+\d{4}-\d\d-\d\d \d\d:\d\dZ/);
    // Columns line up: every row has NAME at the header's offset.
    for (const row of rows)
      expect(row.indexOf(' ', header!.indexOf('NAME') - 1)).toBeGreaterThan(0);
    expect(rows.find((r) => r.includes('bot'))).toContain('agent:production web,api-two +data');
  });

  it('revokes a key, after which it is refused', async () => {
    const created = JSON.parse(
      (await pier('tokens', 'create', '--json', '--name', 'short')).stdout,
    );
    const res = await pier('tokens', 'revoke', created.id);
    expect(res.code).toBe(0);
    expect(res.stdout).toBe(`Revoked API key ${created.id}.\n`);
    expect((await tp.request('GET', '/v1/apps', { token: created.token })).status).toBe(401);

    const again = await pier('tokens', 'revoke', created.id);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/^pier: .+ \(not-found\)\n$/);
  });

  it('reports a validation answer with one line per issue', async () => {
    const res = await pier(
      'tokens',
      'create',
      '--name',
      'x',
      '--ttl',
      '5',
      '--scope',
      'everything',
    );
    expect(res.code).toBe(1);
    const lines = res.stderr.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^pier: .+ \(bad-request\)$/);
    expect(lines.slice(1)).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^ {2}- ttlSeconds: /),
        expect.stringMatching(/^ {2}- scopes\.0: /),
      ]),
    );
    expect(res.stdout).toBe('');
  });

  it('rejects a malformed --ttl before calling the server', async () => {
    const res = await pier('tokens', 'create', '--name', 'x', '--ttl', 'soon');
    expect(res.code).toBe(1);
    expect(res.stderr).toContain('whole number of seconds');
  });
});
