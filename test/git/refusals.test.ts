/**
 * `git push` to pier (CONTRACT 8), what is refused, with a real git client over HTTP to
 * a real pier (no machines: every push here stops before a deploy). Who may push: no
 * credentials (401 with `WWW-Authenticate: Basic`, so git asks), a read-only key, a key
 * for another app, an agent token for another app, a production agent token, a revoked
 * key, another organization's key (answered like an app that does not exist), while a
 * `deploy:<app>` key gets through to the build. What may be pushed: a branch whose name
 * makes no preview, two branches at once, a link out of the tree, a pack past the cap, an
 * object git's fsck refuses; fetching and cloning are not offered. A push whose build
 * fails is refused and leaves the branch where it was. With branch previews off (and in
 * a preview's own repository) another branch is stored and nothing is made. The SSH
 * gateway's entrance (`serveGitReceivePack`) takes a whole receive-pack conversation over
 * one stream.
 */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { symlink, writeFile } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serveGitReceivePack } from '../../src/services/git/ssh-push.js';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';
import { GitClient, pushUrl, remoteLines } from './git-client.js';

let tp: TestPlatform;
let org: TestOrg;
let other: TestOrg;
let git: GitClient;
/** A repository whose tree nothing can build: a push of it fails at the build. */
let plain: string;

async function key(body: Record<string, unknown>): Promise<{ id: string; token: string }> {
  const res = await tp.request('POST', '/v1/tokens', {
    token: org.token,
    body: { name: 'git-push', ...body },
  });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return { id: res.body.id, token: res.body.token };
}

function push(dir: string, app: string, token: string | undefined, refspec = 'main') {
  return git.run(['push', pushUrl(tp.url, app, token), refspec], dir);
}

/** Where the app's pushes land on pier's disk. */
async function repoOf(app: string): Promise<string> {
  const res = await tp.request('GET', `/v1/apps/${app}`, { token: org.token });
  return path.join(tp.dataDir, 'builds', 'git', `${res.body.id}.git`);
}

/** The commit `ref` names in the app's repository, or '' when it has none. */
async function serverRef(app: string, ref = 'refs/heads/main'): Promise<string> {
  const r = await git.run(
    ['--git-dir', await repoOf(app), 'rev-parse', '--verify', '-q', ref],
    '/',
  );
  return r.stdout.trim();
}

beforeAll(async () => {
  // A 1 MB cap on sources (and so on a push's pack), so an oversized push is cheap.
  tp = await startTestPlatform({ buildSourceMaxMb: 1 });
  org = await tp.createOrg();
  other = await tp.createOrg();
  git = await GitClient.create();
  for (const name of ['web', 'elsewhere']) {
    expect(
      (await tp.request('POST', '/v1/apps', { token: org.token, body: { name } })).status,
    ).toBe(201);
  }
  expect(
    (await tp.request('POST', '/v1/apps', { token: other.token, body: { name: 'theirs' } })).status,
  ).toBe(201);
  plain = await git.repo('plain', { 'README.txt': 'nothing to build here\n' });
}, 60_000);

afterAll(async () => {
  await git?.close();
  await tp?.close();
});

describe('git push: who may push', () => {
  it('asks for credentials: 401 with WWW-Authenticate Basic; git without them stops there', async () => {
    const res = await fetch(`${tp.url}/git/web.git/info/refs?service=git-receive-pack`);
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toBe('Basic realm="pier"');
    expect(await res.json()).toMatchObject({ code: 'unauthenticated' });
    const r = await push(plain, 'web', undefined);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/could not read Username/);
    expect(await serverRef('web')).toBe('');
  });

  it('a Bearer works too, and the answer is the refs advertisement of smart HTTP', async () => {
    const res = await fetch(`${tp.url}/git/web.git/info/refs?service=git-receive-pack`, {
      headers: { authorization: `Bearer ${org.token}` },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/x-git-receive-pack-advertisement');
    expect(await res.text()).toMatch(/^001f# service=git-receive-pack\n0000/);
  });

  it('a deploy:web key gets through to the build; a tree nothing builds is refused, the branch unmoved', async () => {
    const { token } = await key({ scopes: ['deploy:web'] });
    const r = await push(plain, 'web', token);
    expect(r.code, r.stderr).not.toBe(0);
    const lines = remoteLines(r.stderr);
    expect(lines[0]).toMatch(/^pier: deploying main \([0-9a-f]{12}\) to web$/);
    expect(lines).toContainEqual(expect.stringMatching(/^pier: building bld-/));
    expect(lines).toContainEqual(expect.stringMatching(/^pier: the build bld-\S+ failed: /));
    expect(lines.at(-1)).toBe(
      'pier: the push is refused; the branch did not move and the live release serves on',
    );
    expect(r.stderr).toMatch(/! \[remote rejected\] main -> main \(pre-receive hook declined\)/);
    expect(await serverRef('web')).toBe('');
    // The build is one of the app's, as if made through the API.
    const builds = (await tp.request('GET', '/v1/apps/web/builds', { token: org.token })).body;
    expect(builds[0]).toMatchObject({ state: 'failed' });
  }, 60_000);

  it('refuses a read-only key, a key for another app, agent tokens for another app or production', async () => {
    const cases: [Record<string, unknown>, number, string][] = [
      [{ scopes: ['read'] }, 403, 'token-scope'],
      [{ scopes: ['deploy:elsewhere'] }, 403, 'token-scope'],
      [{ agent: { class: 'sandbox', apps: ['elsewhere'] } }, 403, 'agent-token-app-scope'],
      [{ agent: { class: 'production' } }, 403, 'agent-token-production-readonly'],
    ];
    for (const [body, status, code] of cases) {
      const { token } = await key(body);
      const r = await push(plain, 'web', token);
      expect(r.code, JSON.stringify(body)).not.toBe(0);
      // git shows pier's sentence (text/plain for git clients) and the status.
      expect(r.stderr).toMatch(new RegExp(`^remote: .*\\(${code}\\)$`, 'm'));
      expect(r.stderr).toMatch(new RegExp(`returned error: ${status}`));
      const res = await fetch(`${tp.url}/git/web.git/info/refs?service=git-receive-pack`, {
        headers: { authorization: `Basic ${Buffer.from(`x:${token}`).toString('base64')}` },
      });
      expect([res.status, (await res.json()).code]).toEqual([status, code]);
    }
    expect(await serverRef('web')).toBe('');
  }, 60_000);

  it('refuses a revoked key with 401', async () => {
    const k = await key({});
    expect((await tp.request('DELETE', `/v1/tokens/${k.id}`, { token: org.token })).status).toBe(
      204,
    );
    const r = await push(plain, 'web', k.token);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/Authentication failed/);
  });

  it("answers another organization's key, and a push to another organization's app, like an app that does not exist", async () => {
    const norm = (s: string) => s.replaceAll(/web|theirs|nowhere/g, 'APP');
    const theirKey = await push(plain, 'web', other.token);
    const theirApp = await push(plain, 'theirs', org.token);
    const missing = await push(plain, 'nowhere', org.token);
    for (const r of [theirKey, theirApp, missing]) {
      expect(r.code).not.toBe(0);
      expect(r.stderr).toMatch(/^remote: App '\w+' not found\. \(not-found\)$/m);
    }
    expect(norm(theirKey.stderr).replace(/:\d+\//g, '/')).toBe(
      norm(missing.stderr).replace(/:\d+\//g, '/'),
    );
    expect(norm(theirApp.stderr)).toBe(norm(missing.stderr));
    expect(await serverRef('web')).toBe('');
  });
});

describe('git push: what may be pushed', () => {
  it('refuses a branch whose name makes no preview name, and two branches at once', async () => {
    const r = await push(plain, 'web', org.token, 'main:___');
    expect(r.code).not.toBe(0);
    expect(remoteLines(r.stderr)[0]).toBe('pier: the branch name ___ makes no preview name');
    expect(await serverRef('web', 'refs/heads/___')).toBe('');
    const two = await git.run(
      ['push', pushUrl(tp.url, 'web', org.token), 'main:a', 'main:b'],
      plain,
    );
    expect(two.code).not.toBe(0);
    expect(remoteLines(two.stderr)[0]).toBe('pier: push one branch at a time');
    // A branch whose build fails (no builder here) takes back the preview its push made.
    const failed = await push(plain, 'web', org.token, 'main:feature');
    expect(failed.code).not.toBe(0);
    const said = remoteLines(failed.stderr);
    expect(said[0]).toMatch(/^pier: preview web--feature made for branch feature/);
    expect(said).toContain('pier: the preview web--feature this push made is removed');
    expect(await serverRef('web', 'refs/heads/feature')).toBe('');
    const previews = await tp.request('GET', '/v1/apps/web/previews', { token: org.token });
    expect(previews.body).toEqual([]);
  });

  it('refuses fetching and cloning', async () => {
    const r = await git.run(['clone', pushUrl(tp.url, 'web', org.token), 'copy'], git.home);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/^remote: pier takes pushes only: .*\(forbidden\)$/m);
    const post = await fetch(`${tp.url}/git/web.git/git-upload-pack`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${org.token}`,
        'content-type': 'application/x-git-upload-pack-request',
      },
      body: '0000',
    });
    expect([post.status, (await post.json()).code]).toEqual([403, 'forbidden']);
  });

  it('refuses a tree with a link out of it: the sources check sees what git archive exports', async () => {
    const dir = await git.repo('link', { Dockerfile: 'FROM scratch\n' });
    await symlink('../../../etc/passwd', path.join(dir, 'pw'));
    await git.commit(dir, {}, 'a link out');
    const r = await push(dir, 'web', org.token);
    expect(r.code).not.toBe(0);
    expect(remoteLines(r.stderr)).toContain(
      'pier: pw: a link to ../../../etc/passwd, outside the tree. (bad-request)',
    );
    expect(await serverRef('web')).toBe('');
  });

  it('refuses a pack past the cap, and objects git fsck refuses, before any hook runs', async () => {
    const big = await git.repo('big', { 'blob.bin': randomBytes(1_500_000).toString('latin1') });
    const r = await push(big, 'web', org.token);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/^remote: fatal: pack exceeds maximum allowed size/m);
    expect(r.stderr).not.toMatch(/remote: pier:/);

    // A tree with an entry named `.git`, made by hand (git add never would).
    const dir = await git.repo('dotgit', { 'a.txt': 'x' });
    const blob = await git.must(['hash-object', '-w', 'a.txt'], dir);
    const tree = await git.must(['mktree'], dir, `100644 blob ${blob}\t.git\n`);
    const commit = await git.must(['commit-tree', tree, '-m', 'evil'], dir);
    const f = await push(dir, 'web', org.token, `${commit}:refs/heads/main`);
    expect(f.code).not.toBe(0);
    expect(f.stderr).toMatch(/^remote: error: object [0-9a-f]+: hasDotgit/m);
    expect(f.stderr).not.toMatch(/remote: pier:/);
    expect(await serverRef('web')).toBe('');
  }, 60_000);
});

describe('git push: branches that deploy nothing', () => {
  it('with branch previews off, a branch is stored and makes no preview; a preview’s own repository stores them too', async () => {
    const setGit = (app: string, body: unknown) =>
      tp.request('PUT', `/v1/apps/${app}/git`, { token: org.token, body });
    expect((await setGit('web', { branchPreviews: false })).status).toBe(200);
    try {
      const head = await git.must(['rev-parse', 'HEAD'], plain);
      const r = await push(plain, 'web', org.token, 'main:topic');
      expect(r.code, r.stderr).toBe(0);
      expect(remoteLines(r.stderr)[0]).toBe(
        'pier: topic is stored and deploys nothing: branch previews are off for web (only main or master deploys)',
      );
      expect(await serverRef('web', 'refs/heads/topic')).toBe(head);
      // A name that could make no preview is stored just the same: no preview is asked for.
      expect((await push(plain, 'web', org.token, 'main:___')).code).toBe(0);
      // (Deleted again: the SSH entrance's test below wants it refused.)
      const gone = await push(plain, 'web', org.token, ':___');
      expect(remoteLines(gone.stderr)).toEqual(['pier: branch ___ deleted; it had no preview']);
      const builds = await tp.request('GET', '/v1/apps/web/builds', { token: org.token });
      expect(builds.body).toHaveLength(1); // the deploy:web key's, above: none for these
      expect((await tp.request('GET', '/v1/apps/web/previews', { token: org.token })).body).toEqual(
        [],
      );
    } finally {
      await setGit('web', { branchPreviews: true });
    }
    const made = await tp.request('POST', '/v1/apps/web/previews', {
      token: org.token,
      body: { name: 'pv' },
    });
    expect(made.status, JSON.stringify(made.body)).toBe(202);
    const r = await push(plain, 'web--pv', org.token, 'main:topic');
    expect(r.code, r.stderr).toBe(0);
    expect(remoteLines(r.stderr)).toEqual([
      'pier: topic is stored and deploys nothing: web--pv is a preview of web, and makes no previews; only main or master deploys it',
    ]);
    expect(await serverRef('web--pv', 'refs/heads/topic')).not.toBe('');
    expect(
      (await tp.request('DELETE', '/v1/apps/web/previews/pv', { token: org.token })).status,
    ).toBe(204);
  }, 60_000);
});

describe('the repository and the app', () => {
  it('goes with the app: deleting it removes the repository its pushes landed in', async () => {
    await push(plain, 'elsewhere', org.token); // refused at the build, but the repository is made
    const repo = await repoOf('elsewhere');
    expect(existsSync(repo)).toBe(true);
    expect((await tp.request('DELETE', '/v1/apps/elsewhere', { token: org.token })).status).toBe(
      204,
    );
    for (let i = 0; i < 50 && existsSync(repo); i++) await new Promise((r) => setTimeout(r, 100));
    expect(existsSync(repo)).toBe(false);
  }, 60_000);
});

describe("the SSH gateway's entrance", () => {
  it('serveGitReceivePack runs a whole receive-pack conversation: the hook speaks through it', async () => {
    // A stand-in for an SSH channel: a TCP connection per push, bridged by git's ext::.
    const stderr: string[] = [];
    const codes: number[] = [];
    // Half-open: the client's end of input is not the end of the answer (as an SSH channel's EOF).
    const server = net.createServer({ allowHalfOpen: true }, (sock) => {
      const errors = new PassThrough();
      errors.on('data', (c: Buffer) => stderr.push(c.toString()));
      void serveGitReceivePack(tp.platform.ctx, {
        orgId: org.id,
        app: 'web',
        stdin: sock,
        stdout: sock,
        stderr: errors,
      }).then((code) => codes.push(code));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as net.AddressInfo).port;
    const bridge = path.join(git.home, 'bridge.cjs');
    await writeFile(
      bridge,
      `const s = require('node:net').connect(${port}, '127.0.0.1');
process.stdin.pipe(s); s.pipe(process.stdout);`,
    );
    try {
      const r = await git.run(
        [
          '-c',
          'protocol.ext.allow=always',
          'push',
          `ext::${process.execPath} ${bridge} %S`,
          'main:___',
        ],
        plain,
      );
      expect(r.code).not.toBe(0);
      expect(remoteLines(r.stderr)[0]).toBe('pier: the branch name ___ makes no preview name');
      // The gateway gets receive-pack's exit status to end the channel with.
      for (let i = 0; i < 50 && codes.length === 0; i++)
        await new Promise((t) => setTimeout(t, 100));
      expect(codes).toHaveLength(1);
    } finally {
      server.close();
    }
  });
});
