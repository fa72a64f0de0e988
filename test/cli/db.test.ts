/**
 * `pier db …` against a real pier with real PostgreSQL and Redis servers: create with a
 * saved URL (0600), list and show never printing it, branch with progress, the one-time
 * copy URL, fork --no-wait, restore, delete, `--json`, the error paths, and `connect`
 * running the real psql and redis-cli with arguments passed through, through the API's
 * database tunnel (a real WebSocket), which refuses whoever may not use the database.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clientCommand } from '../../src/cli/client/db-connect.js';
import { TUNNEL_LIMITS } from '../../src/services/databases/tunnels.js';
import { type TestOrg, type TestPlatform } from '../helpers/platform.js';
import { openDatabaseTunnel } from '../databases/helpers.js';
import { cleanEnv, ENTRY, pierWith, startCliBed, type CliBed } from './run-cli.js';

let tp: TestPlatform;
let org: TestOrg;
let tmp: CliBed['tmp'];
let env: Record<string, string>;
const pier = pierWith(() => env);

/** The main database's URL, from create; every later test reads it. */
let mainUrl = '';
const PG_URL = /^postgresql:\/\/app:[^@/]+@127\.0\.0\.1:\d+\/app\?sslmode=require$/;

/** Waits (without the CLI) for a database to leave `restoring`, so nothing is left running. */
async function settled(name: string): Promise<any> {
  for (let i = 0; i < 600; i++) {
    const res = await tp.request('GET', `/v1/resources/${name}`, { token: org.token });
    if (res.status !== 200 || res.body.state !== 'restoring') return res.body;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${name} never settled`);
}

beforeAll(async () => {
  ({ tp, org, tmp, env } = await startCliBed());
});
afterAll(async () => {
  await tp?.close();
  await tmp?.remove();
});

describe('pier db create|list|show', () => {
  it('prints the URL once on stdout and --save keeps it 0600, keyed by API address', async () => {
    const created = await pier(['db', 'create', 'main', '--kind', 'postgres', '--save']);
    expect(created.code, created.stderr).toBe(0);
    expect(created.stdout).toMatch(new RegExp(PG_URL.source.replace('$', '\\n$')));
    mainUrl = created.stdout.trim();
    expect(created.stderr).toMatch(/^Created postgres database main on port \d+\. Its URL:$/m);
    const store = path.join(tmp.dir, 'databases.json');
    expect(created.stderr).toContain(`Saved the URL in ${store}`);
    expect((await stat(store)).mode & 0o777).toBe(0o600);
    expect(JSON.parse(await readFile(store, 'utf8'))).toEqual({ [tp.url]: { main: mainUrl } });
  });

  it('lists and shows without ever printing the URL or its password', async () => {
    const password = decodeURIComponent(new URL(mainUrl).password);
    const outs = await Promise.all([
      pier(['db', 'list']),
      pier(['db', 'list', '--json']),
      pier(['db', 'show', 'main']),
      pier(['db', 'show', 'main', '--json']),
    ]);
    for (const out of outs) {
      expect(out.code, out.stderr).toBe(0);
      expect(out.stdout + out.stderr).not.toContain(password);
    }
    const [table, listJson, show, showJson] = outs.map((o) => o.stdout);
    const lines = table!.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^NAME\s+KIND\s+STATE\s+POWER\s+PORT\s+COPY-OF\s+EXPIRES$/);
    expect(lines[1]).toMatch(/^main\s+postgres\s+ready\s+running\s+\d+\s+-\s+-$/);
    const list = JSON.parse(listJson!);
    expect(list).toEqual([expect.objectContaining({ name: 'main', kind: 'postgres' })]);
    expect(JSON.parse(showJson!)).toEqual(list[0]);
    expect(show).toMatch(/^Name: +main$/m);
    expect(show).toMatch(/^State: +ready$/m);
    expect(show).toMatch(/^Saved URL: +yes \(pier db connect main\)$/m);
  });
});

describe('pier db connect', () => {
  it('runs the real psql with the saved URL and passes arguments after --', async () => {
    const made = await pier([
      'db',
      'connect',
      'main',
      '--',
      '-q',
      '-c',
      'create table t (x int); insert into t values (42)',
    ]);
    expect(made.code, made.stderr).toBe(0);
    const one = await pier(['db', 'connect', 'main', '--', '-tA', '-c', 'select 1']);
    expect(one.code, one.stderr).toBe(0);
    expect(one.stdout).toBe('1\n');
  });

  it("passes psql's exit code through and explains a missing client or URL", async () => {
    // 3 is psql's own "a script failed with ON_ERROR_STOP", distinct from pier's 1.
    const script = path.join(tmp.dir, 'bad.sql');
    await writeFile(script, 'select nonsense;\n');
    const bad = await pier(['db', 'connect', 'main', '--', '-v', 'ON_ERROR_STOP=1', '-f', script]);
    expect(bad.code).toBe(3);
    expect(bad.stderr).toMatch(/column "nonsense" does not exist/);
    expect(bad.stderr).not.toMatch(/^pier:/m);

    const empty = path.join(tmp.dir, 'empty-path');
    await mkdir(empty, { recursive: true });
    const missing = await pier(['db', 'connect', 'main'], { env: { PATH: empty } });
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/^pier: psql is not installed \(or not on PATH\)/);

    const unsaved = await pier(['db', 'connect', 'nosuch']);
    expect(unsaved.code).toBe(1);
    expect(unsaved.stderr).toMatch(/^pier: no saved URL for nosuch\. Pass --url/);
  });

  it('runs the real redis-cli over TLS on a redis database', async () => {
    const created = await pier(['db', 'create', 'cache', '--kind', 'redis', '--save', '--json']);
    expect(created.code, created.stderr).toBe(0);
    expect(JSON.parse(created.stdout)).toMatchObject({
      name: 'cache',
      kind: 'redis',
      url: expect.stringMatching(/^rediss:\/\/app:[^@]+@127\.0\.0\.1:\d+$/),
    });
    const set = await pier(['db', 'connect', 'cache', '--', 'SET', 'greeting', 'hello']);
    expect(set.code, set.stderr).toBe(0);
    expect(set.stdout).toBe('OK\n');
    const get = await pier(['db', 'connect', 'cache', '--', 'GET', 'greeting']);
    expect(get.stdout).toBe('hello\n');
  });

  it('builds redis-cli arguments with the password only in the environment', () => {
    const cmd = clientCommand('rediss://app:s%2Fecret@127.0.0.1:20007/2', ['PING']);
    expect(cmd.bin).toBe('redis-cli');
    expect(cmd.args).toEqual([
      '-h',
      '127.0.0.1',
      '-p',
      '20007',
      '--user',
      'app',
      '-n',
      '2',
      '--tls',
      '--insecure',
      'PING',
    ]);
    expect(cmd.env).toEqual({ REDISCLI_AUTH: 's/ecret' });
    const pg = clientCommand('postgresql://app:pw@h:5/app?sslmode=require', [], 'ca.pem');
    expect(pg.args[1]).toBe(
      `postgresql://app@h:5/app?sslmode=verify-ca&sslrootcert=${encodeURIComponent(path.resolve('ca.pem'))}`,
    );
    expect(pg.env).toEqual({ PGPASSWORD: 'pw' });
  });
});

const openTunnel = (name: string, token: string) => openDatabaseTunnel(tp, name, token);

async function newKey(body: Record<string, unknown>): Promise<{ id: string; token: string }> {
  const res = await tp.request('POST', '/v1/tokens', { token: org.token, body });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body;
}

// PostgreSQL's SSLRequest: a server answers one byte, 'S' (it does TLS).
const SSL_REQUEST = Buffer.from([0, 0, 0, 8, 4, 210, 22, 47]);

describe('the database tunnel', () => {
  it('carries redis-cli through `pier db connect` (PING) and answers 426 without an upgrade', async () => {
    const ping = await pier(['db', 'connect', 'cache', '--', 'PING']);
    expect(ping.code, ping.stderr).toBe(0);
    expect(ping.stdout).toBe('PONG\n');
    const plain = await tp.request('GET', '/v1/resources/main/tunnel', { token: org.token });
    expect(plain.status).toBe(426);
    expect(plain.body.code).toBe('upgrade-required');
  });

  it('dials the front itself with --direct (here: on the host, which the front serves)', async () => {
    const direct = await pier(['db', 'connect', 'main', '--direct', '--', '-tA', '-c', 'select 2']);
    expect(direct.code, direct.stderr).toBe(0);
    expect(direct.stdout).toBe('2\n');
  });

  it("answers another organization's database exactly like a missing one", async () => {
    const other = await tp.createOrg();
    const theirs = await openTunnel('main', other.token);
    const missing = await openTunnel('nosuch', org.token);
    expect(theirs.status).toBe(404);
    expect(theirs.body.code).toBe('not-found');
    expect(missing.status).toBe(404);
    expect(theirs.body.error.replace('main', 'X')).toBe(missing.body.error.replace('nosuch', 'X'));
  });

  it('refuses a read-only key, an app-limited agent and a production agent without prodDataRead', async () => {
    await tp.request('POST', '/v1/apps', { token: org.token, body: { name: 'tunnel-web' } });
    const reader = await newKey({ name: 'reader', scopes: ['read'] });
    const limited = await newKey({
      name: 'limited',
      agent: { class: 'sandbox', apps: ['tunnel-web'] },
    });
    const prod = await newKey({ name: 'prod', agent: { class: 'production' } });
    const cases: [string, number, string][] = [
      [reader.token, 403, 'token-scope'],
      [limited.token, 403, 'agent-token-app-scope'],
      [prod.token, 403, 'agent-token-production-data'],
    ];
    for (const [token, status, code] of cases) {
      const res = await openTunnel('main', token);
      expect(res.ws, code).toBeUndefined();
      expect([res.status, res.body.code]).toEqual([status, code]);
    }
  });

  it('lets a production agent with prodDataRead through, and audits its tunnels', async () => {
    const agent = await newKey({
      name: 'prod-reader',
      agent: { class: 'production', prodDataRead: true },
    });
    const { ws } = await openTunnel('main', agent.token);
    expect(ws).toBeDefined();
    ws!.send(SSL_REQUEST);
    const [answer] = (await once(ws!, 'message')) as [Buffer];
    expect(answer.toString()).toBe('S');
    ws!.close();
    const audit = await tp.request('GET', `/v1/agent-actions?token=${agent.id}`, {
      token: org.token,
    });
    expect(audit.body).toEqual([
      expect.objectContaining({
        route: '/v1/resources/:name/tunnel',
        path: '/v1/resources/main/tunnel',
        verdict: 'allowed',
      }),
    ]);
  });

  it('pier db proxy carries each local connection; a refused tunnel is explained', async () => {
    const child = spawn(process.execPath, [...ENTRY, 'db', 'proxy', 'main'], {
      env: cleanEnv(env),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    try {
      const [line] = (await once(child.stdout, 'data')) as [Buffer];
      const port = Number(/^127\.0\.0\.1:(\d+)$/m.exec(line.toString())?.[1]);
      for (let i = 0; i < 2; i++) {
        const sock = net.connect(port, '127.0.0.1');
        sock.write(SSL_REQUEST);
        const [answer] = (await once(sock, 'data')) as [Buffer];
        expect(answer.toString()).toBe('S');
        sock.destroy();
      }
    } finally {
      child.kill('SIGTERM');
      if (child.exitCode === null) await once(child, 'exit');
    }
    const reader = await newKey({ name: 'reader-cli', scopes: ['read'] });
    const refused = await pier(['db', 'connect', 'main', '--', '-c', 'select 1'], {
      env: { PIER_API_KEY: reader.token },
    });
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/^pier: the tunnel to main was refused: .*\(token-scope\)$/m);
  }, 60_000);

  it('bounds tunnels: a database over its count answers 429, an idle tunnel is closed', async () => {
    const saved = { ...TUNNEL_LIMITS };
    Object.assign(TUNNEL_LIMITS, { perDatabase: 1, idleMs: 500 });
    try {
      const first = await openTunnel('main', org.token);
      const second = await openTunnel('main', org.token);
      expect([second.status, second.body?.code, second.body?.limit]).toEqual([
        429,
        'too-many-tunnels',
        1,
      ]);
      const [code, reason] = (await once(first.ws!, 'close')) as [number, Buffer];
      expect([code, reason.toString()]).toEqual([1000, 'idle']);
      // Its place is given back: the next one opens.
      const third = await openTunnel('main', org.token);
      expect(third.ws).toBeDefined();
      third.ws!.close();
    } finally {
      Object.assign(TUNNEL_LIMITS, saved);
    }
  });

  it('closes an open tunnel within 2 s of its key being revoked', async () => {
    const key = await newKey({ name: 'to-revoke' });
    const { ws } = await openTunnel('main', key.token);
    ws!.send(SSL_REQUEST);
    await once(ws!, 'message');
    const frames: string[] = [];
    ws!.on('message', (d: Buffer, binary: boolean) => {
      if (!binary) frames.push(d.toString());
    });
    const closed = once(ws!, 'close') as Promise<[number, Buffer]>;
    const revokedAt = Date.now();
    const del = await tp.request('DELETE', `/v1/tokens/${key.id}`, { token: org.token });
    expect(del.status).toBeLessThan(300);
    const [code, reason] = await closed;
    expect(Date.now() - revokedAt).toBeLessThan(2_000);
    expect([code, reason.toString()]).toEqual([1008, 'revoked']);
    expect(JSON.parse(frames[0]!)).toMatchObject({ type: 'error', reason: 'revoked' });
  });
});

describe('pier db branch|url|fork|restore', () => {
  it('branches with progress on stderr, then hands out the URL exactly once', async () => {
    const branch = await pier(['db', 'branch', 'main', 'feature', '--ttl', '3600']);
    expect(branch.code, branch.stderr).toBe(0);
    expect(branch.stderr).toMatch(/^Waiting for feature \(Ctrl-C stops waiting/m);
    expect(branch.stderr).toMatch(/^feature: ready after \d+\.\ds$/m);
    expect(branch.stdout).toBe(
      'Branch feature of main is ready.\n' +
        'Its URL is shown once: `pier db url feature --save` keeps it for `pier db connect`.\n',
    );

    const url = await pier(['db', 'url', 'feature', '--save']);
    expect(url.code, url.stderr).toBe(0);
    expect(url.stdout).toMatch(new RegExp(PG_URL.source.replace('$', '\\n$')));
    expect(url.stderr).toMatch(
      /^Saved the URL in .+databases\.json; `pier db connect feature` uses it\.$/m,
    );
    const again = await pier(['db', 'url', 'feature']);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(
      /^pier: The URL of 'feature' was handed out at \S+\. \(url-handed-out\)\n$/,
    );
    // The branch holds the source's data, through the URL saved above.
    const read = await pier(['db', 'connect', 'feature', '--', '-tA', '-c', 'select x from t']);
    expect(read.stdout).toBe('42\n');

    const table = await pier(['db', 'list']);
    expect(table.stdout).toMatch(
      /^feature\s+postgres\s+ready\s+\w+\s+\d+\s+main \(branch\)\s+\d{4}-/m,
    );
    expect(table.stdout).not.toContain(url.stdout.trim());
  });

  it('forks with --no-wait and returns while the copy is restoring', async () => {
    const fork = await pier(['db', 'fork', 'main', 'snap', '--no-wait', '--json']);
    expect(fork.code, fork.stderr).toBe(0);
    expect(JSON.parse(fork.stdout)).toMatchObject({
      name: 'snap',
      state: 'restoring',
      copyKind: 'fork',
      sourceName: 'main',
    });
    expect(fork.stderr).toBe('');
    expect((await settled('snap')).state).toBe('ready');

    // Not saved this time: the person holds the URL and passes it.
    const url = await pier(['db', 'url', 'snap']);
    expect(url.code, url.stderr).toBe(0);
    expect(url.stderr).toBe('This is the only time the URL is shown; store it now.\n');
    const read = await pier([
      'db',
      'connect',
      'snap',
      '--url',
      url.stdout.trim(),
      '--',
      '-tA',
      '-c',
      'select x from t',
    ]);
    expect(read.stdout).toBe('42\n');
  });

  it('restores in place and prints the name the old state is kept under', async () => {
    const restore = await pier([
      'db',
      'restore',
      'main',
      '--as-of',
      new Date().toISOString(),
      '--preserve-under',
      'main-before',
    ]);
    expect(restore.code, restore.stderr).toBe(0);
    expect(restore.stderr).toMatch(/its state before is kept as main-before\.$/m);
    // The restore takes seconds, so the first poll sees it under way.
    expect(restore.stderr).toMatch(/^main: restoring +\d+\.\ds$/m);
    expect(restore.stderr).toMatch(/^main: ready after \d+\.\ds$/m);
    expect(restore.stdout).toMatch(/^Restored main to .+; its URL is unchanged\.$/m);
    expect(restore.stdout).toContain('The state before is the branch main-before;');
    const show = await pier(['db', 'show', 'main-before', '--json']);
    expect(JSON.parse(show.stdout)).toMatchObject({ copyKind: 'branch', state: 'ready' });
  });
});

describe('pier db delete and errors', () => {
  it('refuses to delete without --yes off a terminal, then deletes and forgets the URL', async () => {
    const refused = await pier(['db', 'delete', 'snap']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toBe(
      'pier: refusing to delete snap without --yes (no terminal to ask on)\n',
    );
    const deleted = await pier(['db', 'delete', 'main', '--yes']);
    expect(deleted.code, deleted.stderr).toBe(0);
    expect(deleted.stdout).toBe('Deleted database main.\n');
    expect(deleted.stderr).toBe('Removed its saved URL.\n');
    const store = JSON.parse(await readFile(path.join(tmp.dir, 'databases.json'), 'utf8'));
    expect(Object.keys(store[tp.url]).sort()).toEqual(['cache', 'feature']);
    const gone = await pier(['db', 'show', 'main']);
    expect(gone.code).toBe(1);
    expect(gone.stderr).toMatch(/^pier: Database 'main' .*\(not-found\)\n$/);
  });

  it('reports unknown databases, bad arguments and URL refusals plainly', async () => {
    const [branch, url, kind, asOf] = await Promise.all([
      pier(['db', 'branch', 'nosuch', 'x']),
      pier(['db', 'url', 'nosuch']),
      pier(['db', 'create', 'x', '--kind', 'mysql']),
      pier(['db', 'restore', 'feature', '--as-of', 'yesterday']),
    ]);
    expect(branch.code).toBe(1);
    expect(branch.stderr).toMatch(/^pier: Database 'nosuch' .*\(not-found\)\n$/);
    expect(url.code).toBe(1);
    expect(url.stderr).toMatch(/\(not-found\)\n$/);
    expect(kind.code).not.toBe(0);
    expect(kind.stderr).toMatch(/--kind <kind>' argument 'mysql' is invalid/);
    expect(asOf.code).not.toBe(0);
    expect(asOf.stderr).toMatch(/give an ISO 8601 time/);
  });
});
