/**
 * Builds with buildah on a real platform (CONTRACT 7, issue #25 items 2-4): a Dockerfile
 * build from a base image in a local registry, durable and logged, into pier's image
 * store, run as a machine with `build:<id>` (in its own organization only); build
 * secrets that reach RUN steps and never the logs or layers; a RUN step as an attacker
 * (host files, loopback API, the platform database, a database front, another
 * organization's machine, capabilities, mounts, forks past the process cap), in the
 * network namespace pier lent the build (an address on the machines' network, the
 * internet reached, nothing of the host's), with the host's nft ruleset the same before
 * and after and nothing of the build's network left; and detect, whose Dockerfile a build
 * without one uses. The caps (disk, memory, fork bomb, time) are in caps.test.ts.
 */
import { execFile } from 'node:child_process';
import http from 'node:http';
import { access, readdir, writeFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { busyboxLayer, DEFAULT_APPLETS } from '../../src/runtime/images/build.test-helper.js';
import { hostBinariesLayer } from '../../src/runtime/images/host-binaries.test-helper.js';
import type { TestOrg } from '../helpers/platform.js';
import { canRunMachines, startMachineBed, type MachineBed } from '../machines/bed.js';
import { gatewayOf, isMachineIp } from '../../src/runtime/sandbox/cidr.js';
import { KEPT_BUILDS, pruneBuilds } from '../../src/services/builds/prune.js';
import { listening } from '../databases/helpers.js';
import { makeInternet, removeInternet, type Internet } from '../helpers/internet.js';
import { sourceArchive, uploadSource } from './archive.js';
import { buildNetworkLeft } from './network-left.js';
import { existingPaths } from '../helpers/existing-paths.js';

const execFileP = promisify(execFile);
const APPLETS = [
  ...new Set([...DEFAULT_APPLETS, 'nc', 'grep', 'seq', 'mount', 'wc', 'mkdir', 'ip', 'printf']),
];

let bed: MachineBed;
let base: string;
let nodeBase: string;
let other: TestOrg;
let otherMachineIp: string;
/** A database's front (a TCP relay on the host), which no build may reach. */
let frontPort: number;
/** What a build's RUN step may reach beyond the host. */
let internet: Internet;
const marker = `/tmp/pier-build-marker-${process.pid}`;

/** Where the image store keeps the unpacked root of `digest`. */
function imageRoot(digest: string): string {
  return path.join(bed.tp.dataDir, 'images', 'roots-userns', digest.slice('sha256:'.length));
}

const exists = (p: string) =>
  access(p).then(
    () => true,
    () => false,
  );

/** The storage pool's volumes (btrfs subvolumes in `mnt`, or directories in `volumes`). */
async function poolVolumes(): Promise<string[]> {
  for (const sub of ['mnt', 'volumes']) {
    const names = await readdir(path.join(bed.tp.dataDir, 'pool', sub)).catch(() => undefined);
    if (names) return names;
  }
  return [];
}

/**
 * The host's nft ruleset, less the tables of other test beds' machine bridges (`pier_<bridge>`
 * of beds that are not this file's), which other test files change as they run.
 */
async function nftRuleset(): Promise<string> {
  const text = (await execFileP('nft', ['list', 'ruleset'])).stdout;
  const own = `pier_bd${process.pid % 100000}`;
  return text
    .split(/^(?=table )/m)
    .filter(
      (t) =>
        !/^table \S+ pier_/.test(t) ||
        t.startsWith(`table bridge ${own} `) ||
        t.startsWith(`table inet ${own} `),
    )
    .join('');
}

/** Uploads `tree` to `app` and builds it; answers the finished build and its log. */
/** What a build's log says when it removed what an unfinished one left. */
const SWEPT = 'what an unfinished build left removed';

/** The `buildah` storage flags of an app's layer cache (its volume in the pool). */
async function buildahStorageOf(app: string): Promise<string[]> {
  const { id } = (await bed.req('GET', `/v1/apps/${app}`)).body;
  const name = `b-${id.toLowerCase()}`;
  const [volume] = await existingPaths(
    ['mnt', 'volumes'].map((sub) => path.join(bed.tp.dataDir, 'pool', sub, name)),
  );
  expect(volume, `the build cache of ${app}`).toBeDefined();
  return [
    ...['--storage-driver', 'vfs', '--root', path.join(volume!, 'storage')],
    ...['--runroot', path.join(volume!, 'run')],
  ];
}

async function build(
  app: string,
  tree: Parameters<typeof sourceArchive>[0],
  waitMs = 90_000,
): Promise<{ build: any; log: string }> {
  const up = await uploadSource(bed.tp.url, bed.org.token, app, sourceArchive(tree));
  expect(up.status).toBe(201);
  const made = await bed.req('POST', `/v1/apps/${app}/builds`, { source: up.body.id });
  expect(made.status).toBe(202);
  expect(made.body).toMatchObject({ app, source: up.body.id, state: 'queued' });
  // follow=1 streams until the build ends: the answer's end is the build's end.
  const logs = await fetch(`${bed.tp.url}/v1/builds/${made.body.id}/logs?follow=1`, {
    headers: { authorization: `Bearer ${bed.org.token}` },
    signal: AbortSignal.timeout(waitMs),
  });
  expect(logs.status).toBe(200);
  const log = await logs.text();
  const done = await bed.req('GET', `/v1/builds/${made.body.id}`);
  return { build: done.body, log };
}

function viaProxy(app: string, path = '/'): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const r = http.get(`${bed.tp.url}${path}`, { headers: { host: `${app}.127.0.0.1` } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    });
    r.on('error', reject);
  });
}

beforeAll(async () => {
  if (!canRunMachines) return;
  bed = await startMachineBed('bd', 240, {
    // Generous: the time cap is tested in caps.test.ts, and a loaded host is slow.
    buildTimeoutS: 120,
    buildPids: 64,
    buildDiskGb: 1,
    buildMemoryMb: 256,
    // The stand-in internet is in a private range, as it must be on a test host.
    allowPrivateTargets: true,
  });
  base = await bed.image('base:1', {
    layers: [busyboxLayer(APPLETS), [{ path: 'run/', type: 'dir' }]],
    config: { Cmd: ['/bin/sh'] },
  });
  nodeBase = await bed.image('node:1', {
    layers: [busyboxLayer(APPLETS), hostBinariesLayer([process.execPath], 'usr/local/bin')],
    config: { Env: ['PATH=/usr/local/bin:/bin'] },
  });
  for (const name of ['web', 'attack', 'slow', 'nodeapp', 'site']) {
    expect((await bed.req('POST', '/v1/apps', { name })).status).toBe(201);
  }
  // Another organization's machine, which no build may reach.
  other = await bed.tp.createOrg();
  expect((await bed.req('POST', '/v1/apps', { name: 'theirs' }, other.token)).status).toBe(201);
  const m = await bed.req(
    'POST',
    '/v1/apps/theirs/machines',
    { image: base, start: 'exec httpd -f -p 8080 -h /', internalPort: 8080 },
    other.token,
  );
  expect(m.status).toBe(201);
  otherMachineIp = m.body.privateIp;
  // Made once the bed's bridge stands, so that its range is another.
  internet = await makeInternet(240);
  const db = await bed.req('POST', '/v1/resources', { name: 'bdb', kind: 'postgres' });
  expect(db.status, JSON.stringify(db.body)).toBe(201);
  frontPort = db.body.port;
  await writeFile(marker, 'host secret');
}, 180_000);

afterAll(async () => {
  await rm(marker, { force: true });
  await removeInternet(internet);
  // The bed destroys its own organization's machines; the other one's is ours to destroy.
  for (const m of (await bed?.req('GET', '/v1/apps/theirs/machines', undefined, other?.token))
    ?.body ?? []) {
    await bed.req('POST', `/v1/machines/${m.id}/destroy`, undefined, other.token);
  }
  await bed?.close();
}, 120_000);

describe.skipIf(!canRunMachines)('builds', () => {
  let built: any;
  /** The rebuild of `web`: no machine runs it. */
  let rebuilt: any;

  it('builds a Dockerfile into the image store, logged, with build secrets; a machine runs build:<id>', async () => {
    const put = await bed.req('PUT', '/v1/apps/web/secrets', {
      secrets: { NPM_TOKEN: 'tok-3141592653', PLAIN: 'not-for-builds' },
      build: { NPM_TOKEN: true },
    });
    expect(put.status).toBe(200);
    const before = await nftRuleset();
    const dockerfile = [
      `FROM ${base} AS stage`,
      'RUN echo built-in-stage > /stage.txt',
      `FROM ${base}`,
      'RUN echo built-in-final > /final.txt',
      'COPY --from=stage /stage.txt /srv/stage.txt',
      'COPY index.html /srv/index.html',
      // The secret is there in the step (its length is printed), and nowhere after.
      'RUN --mount=type=secret,id=NPM_TOKEN echo "secret bytes: $(wc -c < /run/secrets/NPM_TOKEN)" && ls /run/secrets/ ; echo "plain: ${PLAIN:-unset}"',
      'RUN echo "uid_map: $(cat /proc/self/uid_map)"',
      'CMD ["httpd", "-f", "-p", "8080", "-h", "/srv"]',
    ].join('\n');
    const { build: b, log } = await build('web', {
      Dockerfile: dockerfile,
      'index.html': 'hello from a build',
    });
    expect(b.state, log).toBe('done');
    expect(b).toMatchObject({ app: 'web', builder: 'dockerfile' });
    expect(b.imageDigest).toMatch(/^sha256:[a-f0-9]{64}$/);
    expect(b.startedAt && b.finishedAt).toBeTruthy();
    expect(log).toContain('secret bytes: 14');
    expect(log).toContain('plain: unset');
    expect(log).not.toContain('tok-3141592653');
    // The build's root is the machines' remapped root: host uid 200000, not 0.
    expect(log).toMatch(/uid_map:\s+0\s+200000\s+65536/);
    // buildah added no tables, chains or rules to the host's firewall, and the build's
    // place in the walls went with its network.
    expect(await nftRuleset()).toBe(before);
    expect(await buildNetworkLeft(bed.tp.dataDir, b.id)).toEqual([]);
    built = b;

    // A rebuild with only a source change reuses the app's layer cache for the steps before it.
    const again = await build('web', { Dockerfile: dockerfile, 'index.html': 'changed' });
    expect(again.build.state, again.log).toBe('done');
    // Of every stage: the final one's too (its image of the last build is kept for that).
    expect(again.log).toMatch(/RUN echo built-in-stage[^\n]*\n--> Using cache/);
    expect(again.log).toMatch(/RUN echo built-in-final[^\n]*\n--> Using cache/);
    expect(again.build.imageDigest).not.toBe(b.imageDigest);
    // The build before it ended well: nothing was looked for (no /proc scan, no buildah rm).
    expect(again.log).not.toContain(SWEPT);
    rebuilt = again.build;

    const listed = await bed.req('GET', '/v1/apps/web/builds');
    expect(listed.body.map((x: any) => x.id)).toContain(b.id);

    const m = await bed.req('POST', '/v1/apps/web/machines', {
      image: `build:${b.id}`,
      internalPort: 8080,
    });
    expect(m.status, JSON.stringify(m.body)).toBe(201);
    expect(m.body.config.image).toBe(`build:${b.id}`);
    expect((await viaProxy('web', '/index.html')).text).toBe('hello from a build');
    expect((await viaProxy('web', '/stage.txt')).text).toBe('built-in-stage\n');
    // Nothing of the secret in the image the machine runs (its unpacked root in the store).
    const root = path.join(bed.tp.dataDir, 'images', 'roots-userns', b.imageDigest.slice(7));
    const grep = await execFileP('grep', ['-r', '-l', 'tok-3141592653', root]).catch((e) => e);
    expect(grep.code).toBe(1);
  }, 180_000);

  it("removes what a failed build left (buildah's working container) at the app's next build", async () => {
    const failed = await build('slow', { Dockerfile: `FROM ${base}\nRUN echo half && false\n` });
    expect(failed.build.state, failed.log).toBe('failed');
    const storage = await buildahStorageOf('slow');
    const list = () => execFileP('buildah', [...storage, 'containers', '-q']);
    expect((await list()).stdout.trim(), 'the failed step left its container').not.toBe('');
    const next = await build('slow', { Dockerfile: `FROM ${base}\nCMD ["true"]\n` });
    expect(next.build.state, next.log).toBe('done');
    expect(next.log).toContain(SWEPT);
    expect((await list()).stdout.trim(), 'working containers').toBe('');
  });

  it('gives back the network lent while a base image failed to pull', async () => {
    // The RUN step's network is made while the bases are pulled (local-builder.ts).
    const missing = base.replace(/base:1$/, 'missing:1');
    const failed = await build('slow', { Dockerfile: `FROM ${missing}\nRUN true\n` });
    expect(failed.build.state, failed.log).toBe('failed');
    expect(failed.build.error).toMatch(/could not be pulled/);
    expect(await buildNetworkLeft(bed.tp.dataDir, failed.build.id)).toEqual([]);
  });

  it("is another organization's only as build-not-found", async () => {
    expect((await bed.req('GET', `/v1/builds/${built.id}`, undefined, other.token)).body.code).toBe(
      'build-not-found',
    );
    expect(
      (await bed.req('GET', `/v1/builds/${built.id}/logs`, undefined, other.token)).status,
    ).toBe(404);
    const m = await bed.req(
      'POST',
      '/v1/apps/theirs/machines',
      { image: `build:${built.id}`, internalPort: 8080 },
      other.token,
    );
    expect(m.status).toBe(404);
    expect(m.body.code).toBe('build-not-found');
  });

  it('holds a RUN step like a machine: its own address behind the walls, the internet, and no host files, loopback, database, store, other orgs, capabilities, mounts; a fork bomb stops', async () => {
    const apiPort = new URL(bed.tp.url).port;
    const { machinesCidr, servicesPort } = bed.tp.platform.config;
    const gateway = gatewayOf(machinesCidr);
    // The host itself reaches the front: a refusal below is the build's walls.
    expect(await listening(frontPort)).toBe(true);
    const probe = (name: string, host: string, port: number | string) =>
      `(nc -w 3 ${host} ${port} </dev/null && echo "${name}: reached" || echo "${name}: refused")`;
    const { build: b, log } = await build('attack', {
      Dockerfile: [
        `FROM ${base}`,
        `RUN cat ${marker} || echo "host file: refused"`,
        // Its own network: an address of the machines', the way out and the resolver.
        'RUN ip addr show dev eth0; ip route; cat /etc/resolv.conf',
        `RUN printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 3 ${internet.at(2)} 8080; echo`,
        `RUN ${probe('loopback api', '127.0.0.1', apiPort)}`,
        `RUN ${probe('database', '127.0.0.1', 5432)}`,
        // What the host serves machines on the gateway (the API and the S3 gateway of the
        // services listener, a database's front) and another organization's machine: each
        // a dropped connection (a 3 s wait), so all at once.
        `RUN ${[
          probe('api on gateway', gateway, apiPort),
          probe('store on gateway', gateway, servicesPort),
          probe('front on gateway', gateway, frontPort),
          probe('front on loopback', '127.0.0.1', frontPort),
          probe('other org', otherMachineIp, 8080),
        ].join(' & ')} & wait`,
        'RUN grep CapEff /proc/self/status; mkdir -p /mnt/x; mount -t tmpfs none /mnt/x || echo "mount: refused"',
        // Forks past the build's process cap fail (and the step itself goes on).
        'RUN sh -c "for i in \\$(seq 200); do sleep 4 & done" 2>&1 | grep -m1 fork; echo "fork bomb over"',
        'RUN echo survived',
      ].join('\n'),
    });
    expect(b.state, log).toBe('done');
    expect(log).toContain('host file: refused');
    expect(log).not.toContain('host secret');
    const [, ip, prefix] = /inet (\S+)\/(\d+)/.exec(log) ?? [];
    expect(isMachineIp(machinesCidr, ip ?? ''), log).toBe(true);
    expect(`${ip}/${prefix}`).not.toBe(`${otherMachineIp}/${machinesCidr.split('/')[1]}`);
    expect(prefix).toBe(machinesCidr.split('/')[1]);
    expect(log).toMatch(new RegExp(`default via ${gateway.replace(/\./g, '\\.')} dev eth0`));
    expect(log).toContain(`nameserver ${gateway}`);
    // The internet saw the host's address (NAT), not the build's.
    expect(log).toContain(`seen ${internet.host} on ${internet.at(2)}`);
    for (const name of [
      'loopback api',
      'database',
      'api on gateway',
      'store on gateway',
      'front on gateway',
      'front on loopback',
      'other org',
    ])
      expect(log).toMatch(new RegExp(`^${name}: refused$`, 'm'));
    expect(log).not.toMatch(/^[a-z ]+: reached$/m);
    expect(log).toContain('mount: refused');
    // Capabilities, if any, are of the build's user namespace: never CAP_SYS_ADMIN.
    const capEff = /CapEff:\s*([0-9a-f]+)/.exec(log)?.[1];
    expect(capEff).toBeDefined();
    expect(BigInt(`0x${capEff}`) & (1n << 21n)).toBe(0n);
    expect(log).toMatch(/can't fork/);
    expect(log).toContain('fork bomb over');
    expect(log).toContain('survived');
    expect(await buildNetworkLeft(bed.tp.dataDir, b.id)).toEqual([]);
  }, 180_000);

  it('prunes old builds with their logs and images, but keeps one a machine runs', async () => {
    const ctx = bed.tp.platform.ctx;
    const app = (await bed.req('GET', '/v1/apps/web')).body;
    expect(await exists(imageRoot(built.imageDigest))).toBe(true);
    expect(await exists(imageRoot(rebuilt.imageDigest))).toBe(true);
    // KEPT_BUILDS newer finished builds make both real ones old.
    for (let i = 0; i < KEPT_BUILDS; i++) {
      await ctx.db
        .insertInto('builds')
        .values({
          id: `bld-prune${String(i).padStart(11, '0')}`,
          org_id: bed.org.id,
          app_id: app.id,
          source_id: built.source,
          state: 'failed',
          error: 'seeded',
          created_at: new Date(Date.now() + 60_000 + i),
        })
        .execute();
    }
    await pruneBuilds(ctx, app.id);
    // The rebuild is gone: its row, its log, its image in the store.
    expect((await bed.req('GET', `/v1/builds/${rebuilt.id}`)).status).toBe(404);
    expect(await exists(path.join(bed.tp.dataDir, 'builds', 'logs', `${rebuilt.id}.log`))).toBe(
      false,
    );
    expect(await exists(imageRoot(rebuilt.imageDigest))).toBe(false);
    // The first build runs as a machine of the app: it stays, and so does its image.
    expect((await bed.req('GET', `/v1/builds/${built.id}`)).status).toBe(200);
    expect(await exists(imageRoot(built.imageDigest))).toBe(true);
    expect((await viaProxy('web', '/index.html')).text).toBe('hello from a build');
  });

  it("removes an app's sources, build logs, images and layer cache with the app", async () => {
    const app = (await bed.req('GET', '/v1/apps/attack')).body;
    const [b] = (await bed.req('GET', '/v1/apps/attack/builds')).body;
    expect(b.state).toBe('done');
    const files = [
      path.join(bed.tp.dataDir, 'builds', 'logs', `${b.id}.log`),
      path.join(bed.tp.dataDir, 'builds', 'sources', `${b.source}.tar.gz`),
      imageRoot(b.imageDigest),
    ];
    const volume = `b-${app.id.toLowerCase()}`;
    for (const f of files) expect(await exists(f), f).toBe(true);
    expect(await poolVolumes()).toContain(volume);
    expect((await bed.req('DELETE', '/v1/apps/attack')).status).toBe(204);
    for (const f of files) expect(await exists(f), f).toBe(false);
    expect(await poolVolumes()).not.toContain(volume);
  });
});

describe.skipIf(!canRunMachines)('detect', () => {
  it('finds a Dockerfile, a Node app, a Python app, a Go module and a static site', async () => {
    const cases: [Record<string, string>, string, number | undefined][] = [
      [{ Dockerfile: 'FROM scratch\n', 'package.json': '{}' }, 'dockerfile', undefined],
      [
        {
          'package.json': JSON.stringify({
            engines: { node: '>=20' },
            scripts: { start: 'node server.js' },
          }),
          'package-lock.json': '{}',
          'server.js': '',
        },
        'node',
        3000,
      ],
      [{ 'requirements.txt': 'flask\n', 'app.py': '' }, 'python', 8000],
      [{ 'pyproject.toml': '[project]\nname = "x"\n' }, 'python', 8000],
      [{ 'go.mod': 'module example.com/hello\n', 'main.go': 'package main' }, 'go', 8080],
      [{ 'index.html': '<p>hi</p>' }, 'static', 8080],
    ];
    for (const [tree, builder, port] of cases) {
      const up = await uploadSource(bed.tp.url, bed.org.token, 'site', sourceArchive(tree));
      const res = await bed.req('POST', '/v1/apps/site/detect', { source: up.body.id });
      expect(res.status).toBe(200);
      expect(res.body.builder).toBe(builder);
      expect(res.body.internalPort).toBe(port);
      if (builder !== 'dockerfile') expect(res.body.dockerfile).toMatch(/^FROM /);
      if (builder === 'node') {
        expect(res.body.startCommand).toBe('npm start');
        expect(res.body.dockerfile).toContain('npm ci');
        expect(res.body.notes.join(' ')).toContain('>=20');
      }
    }
  });

  it('builds a tree without a Dockerfile from what detect answers, and runs it', async () => {
    // The operator's Node base image is the local one (set on the running platform).
    bed.tp.platform.ctx.config.detectImages.node = nodeBase;
    const { build: b, log } = await build('nodeapp', {
      'package.json': JSON.stringify({ main: 'server.js' }),
      'server.js':
        "require('http').createServer((q, s) => s.end('node says hi')).listen(process.env.PORT)",
    });
    expect(b.state, log).toBe('done');
    expect(b).toMatchObject({
      builder: 'node',
      startCommand: 'node server.js',
      internalPort: 3000,
    });
    const m = await bed.req('POST', '/v1/apps/nodeapp/machines', {
      image: `build:${b.id}`,
      internalPort: 3000,
    });
    expect(m.status, JSON.stringify(m.body)).toBe(201);
    expect((await viaProxy('nodeapp')).text).toBe('node says hi');
  }, 180_000);
});
