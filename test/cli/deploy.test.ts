/**
 * `pier deploy`, `pier builds`, `pier releases`, `pier rollback` and `pier deploys` run
 * as a person runs them, against a real pier building with buildah from a base image in
 * a real local registry and running real machines: the archive the server keeps is
 * exactly what the ignore files let through, the upload meter, the build log streamed
 * while the build runs, the app's URL at the end, and each failure's code.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { list } from 'tar';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listSource } from '../../src/cli/client/source-pack.js';
import { busyboxLayer } from '../../src/runtime/images/build.test-helper.js';
import { sourceArchive, uploadSource } from '../builds/archive.js';
import { canRunMachines, startMachineBed, type MachineBed } from '../machines/bed.js';
import { ENTRY, cleanEnv, pierWith } from './run-cli.js';

let bed: MachineBed;
let base: string;
let crash: string;
let work: string;
let env: Record<string, string>;
const pier = pierWith(() => env);
/** A deploy builds and starts machines: more than the usual 25 s for a CLI command. */
const LONG = { timeoutMs: 120_000 };

/** Writes a tree (path -> content) under the test's work directory. */
async function tree(name: string, files: Record<string, string>): Promise<string> {
  const dir = path.join(work, name);
  for (const [p, content] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(dir, p)), { recursive: true });
    await writeFile(path.join(dir, p), content);
  }
  return dir;
}

/** The entries of the archive the server kept for `sourceId`, as listSource names them. */
async function keptEntries(sourceId: string): Promise<string[]> {
  const seen: string[] = [];
  const file = path.join(bed.tp.dataDir, 'builds', 'sources', `${sourceId}.tar.gz`);
  await list({ file, onReadEntry: (e) => seen.push(e.path.replace(/\/$/, '')) });
  return seen;
}

/** The source id and file count `pier deploy` reported on stderr. */
function uploaded(stderr: string): { id: string; files: number } {
  const m = /Uploaded source (src-[\w-]+): (\d+) files/.exec(stderr);
  expect(m, stderr).not.toBeNull();
  return { id: m![1]!, files: Number(m![2]) };
}

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

/** Uploads `files` to `app` and starts a build through the API; answers the build id. */
async function startBuild(app: string, files: Record<string, string>): Promise<string> {
  const up = await uploadSource(bed.tp.url, bed.org.token, app, sourceArchive(files));
  expect(up.status).toBe(201);
  const made = await bed.req('POST', `/v1/apps/${app}/builds`, { source: up.body.id });
  expect(made.status).toBe(202);
  return made.body.id as string;
}

beforeAll(async () => {
  if (!canRunMachines) return;
  work = await mkdtemp(path.join(os.tmpdir(), 'pier-cli-deploy-'));
  // A 1 MB cap on sources, so an oversized upload is cheap to make.
  bed = await startMachineBed('cd', 180, { buildTimeoutS: 60, buildSourceMaxMb: 1 });
  base = await bed.image('base:1', {
    layers: [busyboxLayer(), [{ path: 'www/', type: 'dir' }]],
    config: { Cmd: ['/bin/sh'] },
  });
  crash = await bed.image('crash:1', {
    layers: [busyboxLayer()],
    config: { Cmd: ['/bin/sh', '-c', 'echo dying; exit 3'] },
  });
  env = {
    PIER_CONFIG: path.join(work, 'config.json'),
    PIER_API_URL: bed.tp.url,
    PIER_API_KEY: bed.org.token,
  };
  for (const name of ['web', 'logs', 'plain']) {
    expect((await bed.req('POST', '/v1/apps', { name })).status).toBe(201);
  }
}, 120_000);

afterAll(async () => {
  // The work directory first: it goes even when closing the bed throws.
  if (work) await rm(work, { recursive: true, force: true });
  await bed?.close();
}, 120_000);

describe.skipIf(!canRunMachines)('pier deploy and its family', () => {
  it('deploys a Dockerfile directory: .dockerignore honoured in the archive, the meter, the build log, the URL; releases lists v1 live', async () => {
    const dir = await tree('site', {
      '.dockerignore': '*.secret\nnotes/\n!notes/keep.txt\n',
      Dockerfile: [
        `FROM ${base}`,
        'COPY . /www/',
        'RUN echo files in the context: $(ls -A /www)',
        'EXPOSE 8080',
        'CMD ["httpd", "-f", "-p", "8080", "-h", "/www"]',
      ].join('\n'),
      'index.html': 'deployed by the cli\n',
      'api.secret': 'do not send',
      'notes/draft.txt': 'no',
      'notes/keep.txt': 'yes',
      '.git/HEAD': 'ref: refs/heads/main',
    });
    // EXPOSE: the first release listens on 8080 (the default would be 3000); later deploys
    // keep the live release's config.
    const r = await pier(['deploy', dir, '--app', 'web', '--progress'], LONG);
    expect(r.code, r.stderr).toBe(0);
    // The meter (off a terminal only with --progress) ends at 100 %.
    expect(r.stderr).toMatch(/^upload web {2}.* 100% {2}[\d.]+ MB\/s$/m);
    const src = uploaded(r.stderr);
    const expected = (await listSource(dir, ['Dockerfile'])).entries;
    expect(expected).not.toContain('api.secret');
    expect(expected).not.toContain('.git');
    expect(expected).toContain('notes/keep.txt');
    expect(src.files).toBe(expected.length);
    expect(await keptEntries(src.id)).toEqual(expected);
    // The build log came through, and the build saw only what was sent.
    expect(r.stderr).toMatch(/files in the context: .*index\.html/);
    expect(r.stderr).not.toMatch(/files in the context: .*api\.secret/);
    // stdout is the URL alone.
    const app = (await bed.req('GET', '/v1/apps/web')).body;
    expect(r.stdout.trim()).toBe(app.defaultAddress);
    expect(r.stderr).toMatch(
      /^Deploying build:bld-\S+ to web \(rolling\): deploy dpl-\S+\.\n {2}queued$/m,
    );
    expect(r.stderr).toMatch(/Release v1 of web is live/);
    expect((await viaProxy('web', '/index.html')).text).toBe('deployed by the cli\n');
    expect((await viaProxy('web', '/api.secret')).status).toBe(404);

    const releases = await pier(['releases', '--app', 'web']);
    expect(releases.code, releases.stderr).toBe(0);
    expect(releases.stdout).toMatch(/^VERSION\s+STATUS\s+IMAGE/);
    expect(releases.stdout).toMatch(/^v1\s+live\s+build:bld-/m);
    const deploys = await pier(['deploys', '--app', 'web', '--json']);
    expect(JSON.parse(deploys.stdout)).toMatchObject([{ status: 'done', release: 1 }]);
    const builds = await pier(['builds', '--app', 'web']);
    expect(builds.stdout).toMatch(/^bld-\S+\s+done\s+dockerfile/m);
  }, 180_000);

  it('rollback: no-previous-release with one release; after a detached v2, back to v1 (v3), followed, with the URL', async () => {
    const none = await pier(['rollback', '--app', 'web']);
    expect(none.code).toBe(1);
    expect(none.stderr).toMatch(/^pier: .*\(no-previous-release\)$/m);

    const dir = path.join(work, 'site');
    await writeFile(path.join(dir, 'index.html'), 'second release\n');
    const v2 = await pier(['deploy', dir, '--app', 'web', '--detach', '--json'], LONG);
    expect(v2.code, v2.stderr).toBe(0);
    const made = JSON.parse(v2.stdout);
    expect(made.build.state).toBe('done');
    expect(made.deploy).toMatchObject({ image: `build:${made.build.id}`, app: 'web' });
    expect(made.url).toBeUndefined();
    // --detach returned at once: the deploy goes on without the CLI.
    const deadline = Date.now() + 90_000;
    let state = made.deploy;
    while (state.status !== 'done' && state.status !== 'error' && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 250));
      state = (await bed.req('GET', `/v1/deploys/${made.deploy.id}`)).body;
    }
    expect(state).toMatchObject({ status: 'done', release: 2 });
    expect((await viaProxy('web', '/index.html')).text).toBe('second release\n');

    // Followed like a deploy; --json prints what it made, the URL included.
    const back = await pier(['rollback', '--app', 'web', '--json'], LONG);
    expect(back.code, back.stderr).toBe(0);
    expect(back.stderr).toMatch(/Rolling web back to v1: deploy dpl-/);
    // The steps, from the accepted deploy's on (later ones show when a poll sees them).
    expect(back.stderr).toMatch(/^ {2}queued$/m);
    expect(JSON.parse(back.stdout)).toMatchObject({
      deploy: { status: 'done', release: 3, rollbackOf: 1 },
      url: (await bed.req('GET', '/v1/apps/web')).body.defaultAddress,
    });
    expect((await viaProxy('web', '/index.html')).text).toBe('deployed by the cli\n');
    const releases = await pier(['releases', '--app', 'web']);
    expect(releases.stdout).toMatch(/^v3\s+live\s/m);
    expect(releases.stdout).toMatch(/^v2\s+superseded\s/m);
    expect(releases.stdout).toMatch(/^v1\s+superseded\s/m);
    const deploys = await pier(['deploys', '--app', 'web']);
    expect(deploys.stdout).toMatch(/^dpl-\S+\s+done\s.*\sv3\s.*rollback to v1$/m);

    const current = await pier(['rollback', 'v3', '--app', 'web']);
    expect(current.code).toBe(1);
    expect(current.stderr).toMatch(/\(rollback-target-current\)$/m);
    const bad = await pier(['rollback', 'three', '--app', 'web']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/give a release version/);

    // An image that crashes: the deploy ends error, the command exits 1 with why, and
    // the release before serves on.
    const broken = await pier(
      ['deploy', '--app', 'web', '--image', crash, '--strategy', 'immediate'],
      LONG,
    );
    expect(broken.code).toBe(1);
    expect(broken.stderr).toMatch(
      /^pier: the deploy dpl-\S+ failed: .*did not start.*\(deploy-failed\)$/m,
    );
    expect(broken.stdout).toBe('');
    expect((await viaProxy('web', '/index.html')).text).toBe('deployed by the cli\n');
    expect((await pier(['releases', '--app', 'web'])).stdout).toMatch(/^v4\s+failed\s/m);
  }, 240_000);

  it('builds logs --follow streams a build while it runs and ends with it; a failed build exits 1', async () => {
    const id = await startBuild('logs', {
      Dockerfile: [
        `FROM ${base}`, // The shell computes the markers, so the step's own line (which echoes the
        // command) never holds them.
        'RUN echo first-$((1+1)) && sleep 3 && echo last-$((2+2))',
      ].join('\n'),
    });
    const child = spawn(process.execPath, [...ENTRY, 'builds', 'logs', id, '--follow'], {
      env: cleanEnv(env),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    try {
      // The first line arrives while the build is still running: streamed, not read at the end.
      const deadline = Date.now() + 60_000;
      while (!out.includes('first-2') && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      expect(out, err).toContain('first-2');
      expect((await bed.req('GET', `/v1/builds/${id}`)).body.state).toBe('building');
      expect(out).not.toContain('last-4');
      expect(await exited, err).toBe(0);
    } finally {
      child.kill();
    }
    expect(out).toContain('last-4');

    const failing = await startBuild('logs', {
      Dockerfile: [`FROM ${base}`, 'RUN echo about-to-fail-$((3*3)) && exit 3'].join('\n'),
    });
    const f = await pier(['builds', 'logs', failing, '--follow'], LONG);
    expect(f.code).toBe(1);
    expect(f.stdout).toContain('about-to-fail-9');
    expect(f.stderr).toMatch(/^pier: the build bld-\S+ failed: .*\(build-failed\)$/m);
    // Without --follow the log is what there is, and the command succeeds.
    const once = await pier(['builds', 'logs', failing]);
    expect(once.code).toBe(0);
    expect(once.stdout).toContain('about-to-fail-9');
    const listed = await pier(['builds', 'list', '--app', 'logs']);
    expect(listed.stdout).toMatch(new RegExp(`^${failing}\\s+failed`, 'm'));
  }, 150_000);

  it('honours .gitignore files in a real upload; a tree nothing can build ends build-failed with no deploy', async () => {
    const dir = await tree('plain', {
      '.gitignore': 'dist/\n*.log\n',
      'README.txt': 'nothing to build here',
      'dist/bundle.js': 'x',
      'debug.log': 'l',
      'lib/.gitignore': 'local.txt\n',
      'lib/local.txt': 'l',
      'lib/util.txt': 'u',
    });
    const r = await pier(['deploy', dir, '--app', 'plain'], LONG);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^pier: the build bld-\S+ failed: .*\(build-failed\)$/m);
    const src = uploaded(r.stderr);
    expect(await keptEntries(src.id)).toEqual([
      '.gitignore',
      'README.txt',
      'lib',
      'lib/.gitignore',
      'lib/util.txt',
    ]);
    expect(r.stdout).toBe('');
    expect((await bed.req('GET', '/v1/apps/plain/deploys')).body).toEqual([]);
  }, 120_000);

  it("prints the server's code: an unknown app, an unknown build, too large, a client-side mistake", async () => {
    const dir = await tree('tiny', { 'index.html': 'x' });
    // Random bytes do not compress: past the operator's cap, refused by its length.
    const big = await tree('big', { 'blob.bin': randomBytes(1_200_000).toString('latin1') });
    const [missing, noBuild, tooLarge, both, outside, notDir] = await Promise.all([
      pier(['deploy', dir, '--app', 'nope']),
      pier(['builds', 'logs', 'bld-none']),
      pier(['deploy', big, '--app', 'web']),
      pier(['deploy', dir, '--app', 'web', '--image', 'x', '--dockerfile', 'D']),
      pier(['deploy', dir, '--app', 'web', '--dockerfile', '../Dockerfile']),
      pier(['deploy', path.join(dir, 'index.html'), '--app', 'web']),
    ]);
    for (const r of [missing, noBuild, tooLarge, both, outside, notDir]) expect(r.code).toBe(1);
    expect(missing.stderr).toMatch(/^pier: App 'nope' not found\. \(not-found\)$/m);
    expect(noBuild.stderr).toMatch(/\(build-not-found\)$/m);
    expect(tooLarge.stderr).toMatch(
      /^pier: A source archive may be at most \d+ bytes\. \(too-large\)$/m,
    );
    expect(both.stderr).toMatch(/^pier: --image deploys without a build/m);
    expect(outside.stderr).toMatch(/--dockerfile must name a file inside/);
    expect(notDir.stderr).toMatch(/is not a directory/);
  }, 90_000);
});
