/**
 * `git push {base_url}/git/<app>.git main` deploys (CONTRACT 8, issue #26 item 2): a real
 * git client pushes a Dockerfile project over HTTP to a real pier that builds it with
 * buildah (from a base image in a real local registry) and rolls real machines. The push
 * prints the build and the deploy as `remote:` lines and ends with the app's URL, and the
 * app serves the pushed content through the proxy; a second push with one file changed
 * reuses the build cache; a push whose build fails is refused, the branch stays where it
 * was and the release before serves on; of two pushes at once, one deploys and the other,
 * made against the branch before it, waits and is refused. The app's Git settings: with
 * branch previews off a branch is stored and makes no preview; with a production branch
 * set, that branch deploys the app and main is a branch like any.
 */
import http from 'node:http';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { busyboxLayer } from '../../src/runtime/images/build.test-helper.js';
import { canRunMachines, startMachineBed, type MachineBed } from '../machines/bed.js';
import { GIT_ONLY } from '../../src/ssh-gateway/git.js';
import { baseOptions, runSsh, sshHome, SSH } from '../ssh/client.js';
import { GitClient, pushUrl, remoteLines } from './git-client.js';

let bed: MachineBed;
let git: GitClient;
let base: string;
let site: string;

function viaProxy(app: string, p = '/'): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const r = http.get(`${bed.tp.url}${p}`, { headers: { host: `${app}.127.0.0.1` } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    });
    r.on('error', reject);
  });
}

function push(dir: string) {
  return git.run(['push', pushUrl(bed.tp.url, 'web', bed.org.token), 'main'], dir);
}

/** The commit a branch names in the app's repository on pier's disk ('' for none). */
async function serverRef(branch: string): Promise<string> {
  const app = (await bed.req('GET', '/v1/apps/web')).body;
  const repo = path.join(bed.tp.dataDir, 'builds', 'git', `${app.id}.git`);
  const r = await git.run(
    ['--git-dir', repo, 'rev-parse', '--verify', '-q', `refs/heads/${branch}`],
    '/',
  );
  return r.stdout.trim();
}

/** The commit main names in the app's repository on pier's disk. */
const serverMain = () => serverRef('main');

/** A step before the COPY, so that a change of the tree leaves it cached. */
const dockerfile = (extra = '') =>
  [
    `FROM ${base}`,
    'RUN echo preparing-$((6*7)) && touch /prepared',
    'COPY . /www/',
    extra,
    'EXPOSE 8080',
    'CMD ["httpd", "-f", "-p", "8080", "-h", "/www"]',
  ]
    .filter(Boolean)
    .join('\n');

beforeAll(async () => {
  if (!canRunMachines) return;
  bed = await startMachineBed('gp', 130, { buildTimeoutS: 60 });
  base = await bed.image('base:1', {
    layers: [busyboxLayer(), [{ path: 'www/', type: 'dir' }]],
    config: { Cmd: ['/bin/sh'] },
  });
  git = await GitClient.create();
  expect((await bed.req('POST', '/v1/apps', { name: 'web' })).status).toBe(201);
  site = await git.repo('site', {
    Dockerfile: dockerfile(),
    'index.html': 'pushed with git\n',
  });
}, 120_000);

afterAll(async () => {
  await git?.close();
  await bed?.close();
}, 120_000);

describe.skipIf(!canRunMachines)('git push deploys', () => {
  it('builds and deploys main: the build log and deploy steps as remote: lines, then the URL; the app serves it', async () => {
    const r = await push(site);
    expect(r.code, r.stderr).toBe(0);
    const lines = remoteLines(r.stderr);
    const head = await git.must(['rev-parse', 'HEAD'], site);
    expect(lines[0]).toBe(`pier: deploying main (${head.slice(0, 12)}) to web`);
    expect(lines).toContainEqual(expect.stringMatching(/^pier: source src-\S+: \d+ entries/));
    // The builder's own output, streamed (the shell computed the marker: not the step's echo).
    expect(lines).toContain('preparing-42');
    expect(lines).toContainEqual(expect.stringMatching(/^STEP \d\/\d: COPY \. \/www\/$/));
    expect(lines).toContainEqual(
      expect.stringMatching(/^pier: deploying build:bld-\S+ \(rolling\)/),
    );
    expect(lines).toContain('pier:   queued');
    const app = (await bed.req('GET', '/v1/apps/web')).body;
    expect(lines.at(-1)).toBe(`pier: release v1 of web is live: ${app.defaultAddress}`);
    expect(r.stderr).toMatch(/\* \[new branch\]\s+main -> main/);
    expect(await serverMain()).toBe(head);
    expect((await viaProxy('web', '/index.html')).text).toBe('pushed with git\n');
    const releases = (await bed.req('GET', '/v1/apps/web/releases')).body;
    expect(releases[0]).toMatchObject({ version: 1, status: 'live' });
    expect(releases[0].image).toMatch(/^build:bld-/);
  }, 180_000);

  it('a second push with one file changed reuses the build cache and rolls to v2', async () => {
    await git.commit(site, { 'index.html': 'second push\n' }, 'change the page');
    const r = await push(site);
    expect(r.code, r.stderr).toBe(0);
    const lines = remoteLines(r.stderr);
    // The RUN before the COPY is not run again: buildah says it took the cached layer.
    expect(lines).toContainEqual(expect.stringMatching(/Using cache/));
    expect(lines).not.toContain('preparing-42');
    expect(lines.at(-1)).toMatch(/^pier: release v2 of web is live: /);
    expect(await serverMain()).toBe(await git.must(['rev-parse', 'HEAD'], site));
    expect((await viaProxy('web', '/index.html')).text).toBe('second push\n');
  }, 180_000);

  it('a push whose build fails is refused: the branch stays, the live release serves on', async () => {
    const before = await serverMain();
    await git.commit(
      site,
      {
        Dockerfile: dockerfile('RUN echo about-to-fail-$((3*3)) && exit 3'),
        'index.html': 'never served\n',
      },
      'a broken build',
    );
    const r = await push(site);
    expect(r.code).not.toBe(0);
    const lines = remoteLines(r.stderr);
    expect(lines).toContain('about-to-fail-9');
    expect(lines).toContainEqual(expect.stringMatching(/^pier: the build bld-\S+ failed: /));
    expect(lines.at(-1)).toBe(
      'pier: the push is refused; the branch did not move and the live release serves on',
    );
    expect(r.stderr).toMatch(/! \[remote rejected\] main -> main \(pre-receive hook declined\)/);
    expect(await serverMain()).toBe(before);
    expect((await viaProxy('web', '/index.html')).text).toBe('second push\n');
    const deploys = (await bed.req('GET', '/v1/apps/web/deploys')).body;
    expect(deploys).toHaveLength(2);
    const releases = (await bed.req('GET', '/v1/apps/web/releases')).body;
    expect(releases.map((x: any) => [x.version, x.status])).toEqual([
      [2, 'live'],
      [1, 'superseded'],
    ]);
  }, 180_000);

  it('two pushes at once: one deploys, the other waits for it and is refused (the branch moved)', async () => {
    const live = await serverMain();
    await git.must(['reset', '--quiet', '--hard', live], site);
    for (const b of ['a', 'b']) {
      await git.must(['checkout', '--quiet', '-B', b, live], site);
      await git.commit(site, { 'index.html': `pushed by ${b}\n` }, `from ${b}`);
    }
    const url = pushUrl(bed.tp.url, 'web', bed.org.token);
    const [a, b] = await Promise.all([
      git.run(['push', url, 'a:main'], site),
      git.run(['push', url, 'b:main'], site),
    ]);
    const won = a.code === 0 ? 'a' : 'b';
    const [winner, loser] = won === 'a' ? [a, b] : [b, a];
    expect(winner.code, winner.stderr).toBe(0);
    expect(loser.code).not.toBe(0);
    const lines = remoteLines(loser.stderr);
    expect(lines).toContain('pier: waiting for another push of web to end');
    expect(lines).toContainEqual(
      expect.stringMatching(/^pier: refs\/heads\/main moved while this push was received/),
    );
    expect(await serverMain()).toBe(await git.must(['rev-parse', won], site));
    expect((await viaProxy('web', '/index.html')).text).toBe(`pushed by ${won}\n`);
  }, 180_000);

  it('a push of another branch deploys it to its own preview, production untouched; deleting the branch removes the preview', async () => {
    const live = await serverMain();
    await git.must(['checkout', '--quiet', '-B', 'Feature/New-Look', live], site);
    await git.commit(site, { 'index.html': 'the new look\n' }, 'new look');
    const url = pushUrl(bed.tp.url, 'web', bed.org.token);
    const r = await git.run(['push', url, 'Feature/New-Look'], site);
    expect(r.code, r.stderr).toBe(0);
    const lines = remoteLines(r.stderr);
    expect(lines).toContainEqual(
      expect.stringMatching(
        /^pier: preview web--feature-new-look made for branch Feature\/New-Look/,
      ),
    );
    expect(lines.at(-1)).toMatch(/^pier: release v\d+ of web--feature-new-look is live: /);
    expect((await viaProxy('web--feature-new-look', '/index.html')).text).toBe('the new look\n');
    expect((await viaProxy('web', '/index.html')).text).not.toBe('the new look\n');
    expect(await serverMain()).toBe(live);
    const preview = (await bed.req('GET', '/v1/apps/web/previews/feature-new-look')).body;
    expect(preview).toMatchObject({ state: 'ready', gitBranch: 'Feature/New-Look' });

    const gone = await git.run(['push', url, '--delete', 'Feature/New-Look'], site);
    expect(gone.code, gone.stderr).toBe(0);
    expect(remoteLines(gone.stderr)).toContain(
      'pier: branch Feature/New-Look deleted: its preview feature-new-look is removed',
    );
    expect((await bed.req('GET', '/v1/apps/web/previews/feature-new-look')).status).toBe(404);
    expect((await bed.req('GET', '/v1/apps/web--feature-new-look')).status).toBe(404);
    // main cannot be deleted this way.
    const main = await git.run(['push', url, '--delete', 'main'], site);
    expect(main.code).not.toBe(0);
    expect(await serverMain()).toBe(live);
  }, 180_000);

  it('git push ssh://git@<gateway>/<app>.git with a registered key deploys; another organization’s key finds no app, and the git user gets no shell', async () => {
    const home = await sshHome();
    try {
      const gateway = (await bed.req('GET', '/v1/ssh')).body;
      const hosts = await home.knownHosts(
        'known_hosts',
        gateway.host,
        gateway.port,
        gateway.hostKey,
      );
      const mine = await home.keyPair('mine');
      expect((await bed.req('POST', '/v1/ssh-keys', { publicKey: mine.publicKey })).status).toBe(
        201,
      );
      const theirs = await home.keyPair('theirs');
      const other = await bed.tp.createOrg();
      const added = await bed.tp.request('POST', '/v1/ssh-keys', {
        token: other.token,
        body: { publicKey: theirs.publicKey },
      });
      expect(added.status).toBe(201);
      // The stock client as git runs it (GIT_SSH_COMMAND), with the gateway's key pinned.
      const sshCommand = (identity: string) =>
        [SSH, ...baseOptions(hosts, identity)].map((a) => `'${a}'`).join(' ');
      const url = `ssh://git@${gateway.host}:${gateway.port}/web.git`;
      const live = await serverMain();
      await git.must(['checkout', '--quiet', '-B', 'over-ssh', live], site);
      await git.commit(site, { 'index.html': 'pushed over ssh\n' }, 'over ssh');

      const refused = await git.run(['push', url, 'over-ssh:main'], site, {
        env: { GIT_SSH_COMMAND: sshCommand(theirs.path) },
      });
      expect(refused.code).not.toBe(0);
      expect(refused.stderr).toContain("pier: App 'web' not found. (not-found)");
      expect(await serverMain()).toBe(live);

      const r = await git.run(['push', url, 'over-ssh:main'], site, {
        env: { GIT_SSH_COMMAND: sshCommand(mine.path) },
      });
      expect(r.code, r.stderr).toBe(0);
      expect(remoteLines(r.stderr).at(-1)).toMatch(/^pier: release v\d+ of web is live: /);
      expect(await serverMain()).toBe(await git.must(['rev-parse', 'HEAD'], site));
      expect((await viaProxy('web', '/index.html')).text).toBe('pushed over ssh\n');

      const shell = await runSsh([
        ...baseOptions(hosts, mine.path),
        '-p',
        String(gateway.port),
        `git@${gateway.host}`,
        'id',
      ]);
      expect(shell.code).toBe(1);
      expect(shell.stderr).toContain(`pier: ${GIT_ONLY}`);
    } finally {
      await home.remove();
    }
  }, 180_000);

  it('follows the app’s Git settings: previews off stores a branch and makes nothing; the production branch set deploys', async () => {
    const url = pushUrl(bed.tp.url, 'web', bed.org.token);
    const live = await serverMain();
    try {
      expect((await bed.req('PUT', '/v1/apps/web/git', { branchPreviews: false })).status).toBe(
        200,
      );
      await git.must(['checkout', '--quiet', '-B', 'side', live], site);
      await git.commit(site, { 'index.html': 'a side branch\n' }, 'side');
      const stored = await git.run(['push', url, 'side'], site);
      expect(stored.code, stored.stderr).toBe(0);
      expect(remoteLines(stored.stderr)).toEqual([
        'pier: side is stored and deploys nothing: branch previews are off for web (only main or master deploys)',
        'pier: to deploy branches to previews: pier apps git web --branch-previews on (PUT /v1/apps/web/git {"branchPreviews":true})',
      ]);
      expect(await serverRef('side')).toBe(await git.must(['rev-parse', 'HEAD'], site));
      expect((await bed.req('GET', '/v1/apps/web/previews')).body).toEqual([]);
      expect((await bed.req('GET', '/v1/apps/web--side')).status).toBe(404);
      const gone = await git.run(['push', url, '--delete', 'side'], site);
      expect(gone.code, gone.stderr).toBe(0);
      expect(remoteLines(gone.stderr)).toEqual(['pier: branch side deleted; it had no preview']);

      // trunk deploys the app (its build reuses the cached step); main is then only stored.
      const set = await bed.req('PUT', '/v1/apps/web/git', { productionBranch: 'trunk' });
      expect(set.body).toMatchObject({ productionBranch: 'trunk', branchPreviews: false });
      await git.must(['checkout', '--quiet', '-B', 'trunk', live], site);
      await git.commit(site, { 'index.html': 'from trunk\n' }, 'trunk');
      const deployed = await git.run(['push', url, 'trunk'], site);
      expect(deployed.code, deployed.stderr).toBe(0);
      const lines = remoteLines(deployed.stderr);
      const head = await git.must(['rev-parse', 'HEAD'], site);
      expect(lines[0]).toBe(`pier: deploying trunk (${head.slice(0, 12)}) to web`);
      expect(lines.at(-1)).toMatch(/^pier: release v\d+ of web is live: /);
      expect((await viaProxy('web', '/index.html')).text).toBe('from trunk\n');
      expect(await serverRef('trunk')).toBe(head);

      const main = await git.run(['push', url, 'trunk:main'], site);
      expect(main.code, main.stderr).toBe(0);
      expect(remoteLines(main.stderr)[0]).toBe(
        'pier: main is stored and deploys nothing: branch previews are off for web (only trunk deploys)',
      );
      const noTrunk = await git.run(['push', url, '--delete', 'trunk'], site);
      expect(noTrunk.code).not.toBe(0);
      expect(remoteLines(noTrunk.stderr)[0]).toMatch(
        /^pier: deleting refs\/heads\/trunk is refused/,
      );
      expect(await serverRef('trunk')).toBe(head);
    } finally {
      await bed.req('PUT', '/v1/apps/web/git', { productionBranch: null, branchPreviews: true });
    }
  }, 180_000);
});
