import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestOrg, type TestPlatform } from '../helpers/platform.js';
import { pierWith, startCliBed, type CliBed } from './run-cli.js';

let tp: TestPlatform;
let org: TestOrg;
let tmp: CliBed['tmp'];
let env: Record<string, string>;
const pier = pierWith(() => env);

beforeAll(async () => {
  ({ tp, org, tmp, env } = await startCliBed());
});
afterAll(async () => {
  await tp?.close();
  await tmp?.remove();
});

describe('pier apps', () => {
  it('creates, lists, shows and deletes an app', async () => {
    const created = await pier(['apps', 'create', 'cli-web']);
    expect(created.stderr).toBe('');
    expect(created.code).toBe(0);
    expect(created.stdout).toMatch(/^Created app cli-web \(\S+\) at http:\/\/cli-web\.\S+\.\n$/);

    // Reads are independent: run them side by side to keep the test short.
    const [json, table, show, showJson] = await Promise.all([
      pier(['apps', 'list', '--json']),
      pier(['apps', 'list']),
      pier(['apps', 'show', 'cli-web']),
      pier(['apps', 'show', 'cli-web', '--json']),
    ]);
    const apps = JSON.parse(json.stdout) as { name: string; id: string; orgId: string }[];
    expect(apps).toEqual([expect.objectContaining({ name: 'cli-web', orgId: org.id })]);

    expect(table.stdout.split('\n')[0]).toMatch(/^NAME\s+ID\s+ADDRESS\s+CREATED$/);
    expect(table.stdout.split('\n')[1]).toMatch(
      new RegExp(`^cli-web\\s+${apps[0]!.id}\\s+http://cli-web\\.`),
    );

    expect(show.code).toBe(0);
    expect(show.stdout).toMatch(/^Name: +cli-web$/m);
    expect(show.stdout).toMatch(new RegExp(`^Organization: +${org.id}$`, 'm'));
    expect(JSON.parse(showJson.stdout)).toEqual(apps[0]);

    const del = await pier(['apps', 'delete', 'cli-web']);
    expect(del.code).toBe(0);
    expect(del.stdout).toBe('Deleted app cli-web.\n');
    expect((await pier(['apps', 'list'])).stdout).toBe('No apps.\n');
  });

  it('prints an invalid name as `pier: ... (bad-request)` with issue lines, exit 1', async () => {
    const res = await pier(['apps', 'create', 'Not_Valid']);
    expect(res.code).toBe(1);
    expect(res.stdout).toBe('');
    const [first, ...issues] = res.stderr.trimEnd().split('\n');
    expect(first).toMatch(/^pier: Invalid name .+ \(bad-request\)$/);
    expect(issues).toEqual([expect.stringMatching(/^ {2}- name: lowercase letters/)]);
  });

  it('prints other codes the same way', async () => {
    const [res, reserved] = await Promise.all([
      pier(['apps', 'show', 'no-such-app']),
      pier(['apps', 'create', 'console']),
    ]);
    expect(res.code).toBe(1);
    expect(res.stderr).toBe("pier: App 'no-such-app' not found. (not-found)\n");
    expect(reserved.stderr).toMatch(/^pier: .+ \(name-reserved\)\n$/);
  });

  it('says plainly when the key is refused or the server is unreachable', async () => {
    const [bad, down] = await Promise.all([
      pier(['apps', 'list'], { env: { PIER_API_KEY: 'pier_nope' } }),
      pier(['apps', 'list', '--api-url', 'http://127.0.0.1:59999']),
    ]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/^pier: .+ \(unauthenticated\)\n$/);
    expect(down.code).toBe(1);
    expect(down.stderr).toBe('pier: cannot reach http://127.0.0.1:59999: ECONNREFUSED\n');
  });
});

describe('pier secrets', () => {
  const value = 'hunter2-very-secret';
  const piped = 'from-stdin-value';

  beforeAll(async () => {
    expect(
      (await tp.request('POST', '/v1/apps', { token: org.token, body: { name: 'cli-sec' } }))
        .status,
    ).toBe(201);
  });

  it('sets secrets (staged by default), one of them from stdin, without echoing values', async () => {
    const res = await pier(
      ['secrets', 'set', 'cli-sec', `DB_PASS=${value}`, 'API_TOKEN=-', '--build', 'DB_PASS'],
      {
        input: `${piped}\n`,
      },
    );
    expect(res.stderr).toBe('');
    expect(res.code).toBe(0);
    expect(res.stdout).toBe(
      'Staged API_TOKEN, DB_PASS on cli-sec; machines get the values at the next deploy.\n',
    );

    const unstaged = await pier([
      'secrets',
      'set',
      'cli-sec',
      'LOG_LEVEL=debug',
      '--unstaged',
      '--json',
    ]);
    expect(JSON.parse(unstaged.stdout)).toMatchObject({
      appName: 'cli-sec',
      staged: false,
      changed: ['LOG_LEVEL'],
    });
  });

  it('lists names and metadata, never values', async () => {
    const [table, json] = await Promise.all([
      pier(['secrets', 'list', 'cli-sec']),
      pier(['secrets', 'list', 'cli-sec', '--json']),
    ]);
    expect(table.code).toBe(0);
    const lines = table.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^NAME\s+BUILD\s+MANAGED\s+UPDATED$/);
    expect(lines.slice(1).map((l) => l.split(/\s+/)[0])).toEqual([
      'API_TOKEN',
      'DB_PASS',
      'LOG_LEVEL',
    ]);
    expect(lines.find((l) => l.startsWith('DB_PASS'))).toMatch(/^DB_PASS\s+yes\s+-\s+\d{4}-/);

    const list = JSON.parse(json.stdout) as { name: string; managed: boolean; build?: boolean }[];
    expect(list.find((s) => s.name === 'DB_PASS')).toMatchObject({ managed: false, build: true });
    for (const out of [table.stdout, json.stdout]) {
      expect(out).not.toContain(value);
      expect(out).not.toContain(piped);
      expect(out).not.toContain('debug');
    }
  });

  it('unsets a secret', async () => {
    const res = await pier(['secrets', 'unset', 'cli-sec', 'LOG_LEVEL']);
    expect(res.code).toBe(0);
    expect(res.stdout).toBe('Removed LOG_LEVEL from cli-sec.\n');
    const list = JSON.parse((await pier(['secrets', 'list', 'cli-sec', '--json'])).stdout) as {
      name: string;
    }[];
    expect(list.map((s) => s.name)).toEqual(['API_TOKEN', 'DB_PASS']);
    const again = await pier(['secrets', 'unset', 'cli-sec', 'LOG_LEVEL']);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/\(not-found\)\n$/);
  });

  it('refuses bad pairs locally without printing the value', async () => {
    const [twice, noEq, none] = await Promise.all([
      pier(['secrets', 'set', 'cli-sec', 'A=-', 'B=-']),
      pier(['secrets', 'set', 'cli-sec', 'JUSTANAME']),
      pier(['secrets', 'set', 'cli-sec']),
    ]);
    expect(twice.code).toBe(1);
    expect(twice.stderr).toBe('pier: only one value can come from stdin (A and B ask)\n');
    expect(noEq.stderr).toBe("pier: 'JUSTANAME' is not NAME=VALUE\n");
    expect(none.stderr).toBe('pier: give at least one NAME=VALUE (or --build NAME)\n');
  });

  it('shows the server refusing a reserved name, with the issue line', async () => {
    const res = await pier(['secrets', 'set', 'cli-sec', `PIER_X=${value}`]);
    expect(res.code).toBe(1);
    expect(res.stderr).toMatch(
      /\(bad-request\)\n {2}- secrets\.PIER_X: the prefix PIER_ is reserved/,
    );
    expect(res.stdout + res.stderr).not.toContain(value);
  });
});

describe('pier apps git', () => {
  it('shows the settings and push URLs, changes them, and goes back to the default', async () => {
    expect((await pier(['apps', 'create', 'cli-git'])).code).toBe(0);
    const shown = await pier(['apps', 'git', 'cli-git']);
    expect(shown.stderr).toBe('');
    expect(shown.stdout).toMatch(/^Production branch: +main or master \(the default\)$/m);
    expect(shown.stdout).toMatch(/^Branch previews: +on: a push of another branch deploys/m);
    expect(shown.stdout).toMatch(
      new RegExp(`^Push over HTTPS: +${tp.url.replace(/\./g, '\\.')}/git/cli-git\\.git$`, 'm'),
    );
    expect(shown.stdout).toMatch(/^Push over SSH: +ssh:\/\/git@127\.0\.0\.1:\d+\/cli-git\.git$/m);

    const set = await pier([
      'apps',
      'git',
      'cli-git',
      '--production-branch',
      'trunk',
      '--branch-previews',
      'off',
    ]);
    expect(set.code, set.stderr).toBe(0);
    expect(set.stdout).toMatch(/^Production branch: +trunk$/m);
    expect(set.stdout).toMatch(/^Branch previews: +off: a push of another branch is stored/m);
    const api = await tp.request('GET', '/v1/apps/cli-git/git', { token: org.token });
    expect(api.body).toMatchObject({ productionBranch: 'trunk', branchPreviews: false });

    const [back, json, bad, badBranch] = await Promise.all([
      pier(['apps', 'git', 'cli-git', '--no-production-branch', '--branch-previews', 'on']),
      pier(['apps', 'git', 'cli-git', '--json']),
      pier(['apps', 'git', 'cli-git', '--branch-previews', 'maybe']),
      pier(['apps', 'git', 'nowhere', '--production-branch', 'a..b']),
    ]);
    expect(back.code, back.stderr).toBe(0);
    expect(back.stdout).toMatch(/^Production branch: +main or master \(the default\)$/m);
    expect(JSON.parse(json.stdout)).toMatchObject({ app: 'cli-git', pushUrls: {} });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/give on or off/);
    expect(badBranch.code).toBe(1);
    expect(badBranch.stderr).toMatch(
      /^pier: .+ \(bad-request\)\n {2}- productionBranch: a branch name that may not contain '\.\.'\n$/,
    );
    expect(
      (await tp.request('GET', '/v1/apps/cli-git/git', { token: org.token })).body,
    ).toMatchObject({ productionBranch: null, branchPreviews: true });
  });
});
