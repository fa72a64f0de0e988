/**
 * ImageStore against a real registry (Debian's docker-registry on loopback) with images
 * built and pushed by the test: busybox roots, multi-arch indexes, Docker schema 2,
 * whiteouts, links, hostile layers, tampered blobs and the error codes.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readFile, readdir, readlink, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { freePort } from '../../../test/helpers/registry.js';
import { OutboundGuard } from '../../host/outbound-guard.js';
import { busyboxLayer, zeroFileLayer } from './build.test-helper.js';
import { hostPlatform } from './platform.js';
import { leftovers, rejection, useRegistry } from './store.test-helper.js';

const env = useRegistry();
const { newStore, push } = env;

const busyboxConfig = {
  Entrypoint: ['/bin/sh', '-c'],
  Cmd: ['httpd -f -p 8080'],
  Env: ['PATH=/bin', 'GREETING=hello'],
  WorkingDir: '/srv',
  User: 'nobody',
  StopSignal: 'SIGINT',
  ExposedPorts: ['8080/tcp', '53/udp', '8080/udp'],
};

describe('pulling', () => {
  it('pulls a busybox image by tag and records it', async () => {
    const { image, ref } = await push({ layers: [busyboxLayer()], config: busyboxConfig });
    const { store, dir } = await newStore();
    const started = performance.now();
    const pulled = await store.pull(ref);
    const ms = performance.now() - started;
    console.log(`pull + unpack of a busybox image: ${ms.toFixed(0)} ms, ${pulled.sizeBytes} bytes`);

    expect(pulled.digest).toBe(image.hostDigest);
    expect(pulled.ref).toBe(ref);
    expect(pulled.rootfs).toBe(path.join(dir, 'roots-userns', pulled.digest.slice(7)));
    expect(pulled.config).toEqual({
      entrypoint: ['/bin/sh', '-c'],
      cmd: ['httpd -f -p 8080'],
      env: ['PATH=/bin', 'GREETING=hello'],
      workingDir: '/srv',
      user: 'nobody',
      stopSignal: 'SIGINT',
      exposedPorts: [53, 8080],
    });
    const busybox = path.join(pulled.rootfs, 'bin/busybox');
    expect((await stat(busybox)).mode & 0o777).toBe(0o755);
    expect(await readlink(path.join(pulled.rootfs, 'bin/sh'))).toBe('busybox');
    expect((await stat(path.join(pulled.rootfs, 'tmp'))).mode & 0o7777).toBe(0o1777);
    expect(pulled.sizeBytes).toBeGreaterThan((await stat('/bin/busybox')).size);
    // The binary is the real thing: it runs.
    const { stdout } = await promisify(execFile)(busybox, ['echo', 'from the image']);
    expect(stdout).toBe('from the image\n');
    expect((await stat(path.join(dir, 'roots-userns'))).mode & 0o777).toBe(0o700);
    const record = JSON.parse(
      await readFile(path.join(dir, 'images', `${pulled.digest.slice(7)}.json`), 'utf8'),
    );
    expect(record).toMatchObject({ digest: pulled.digest, ref });
  });

  it('pulls by digest, and pulling by digest again needs no network', async () => {
    const { image, repo } = await push({ layers: [busyboxLayer(['sh'])] });
    const { store, requests } = await newStore();
    const pulled = await store.pull(`${repo}@${image.digest}`);
    expect(pulled.digest).toBe(image.digest);
    expect(pulled.ref).toBe(`${repo}@${image.digest}`);
    const before = requests.length;
    expect((await store.pull(`${repo}@${image.digest}`)).rootfs).toBe(pulled.rootfs);
    expect(requests.length).toBe(before);
  });

  it('resolves a multi-arch index to this host', async () => {
    const host = hostPlatform().architecture;
    const { image, ref, repo } = await push({
      layers: [[{ path: 'common', content: 'both' }]],
      platforms: [
        { architecture: 'amd64', layers: [[{ path: 'arch', content: 'amd64' }]] },
        { architecture: 'arm64', variant: 'v8', layers: [[{ path: 'arch', content: 'arm64' }]] },
      ],
    });
    const { store } = await newStore();
    const pulled = await store.pull(ref);
    expect(pulled.digest).toBe(image.hostDigest);
    expect(pulled.digest).not.toBe(image.digest);
    expect(await readFile(path.join(pulled.rootfs, 'arch'), 'utf8')).toBe(host);
    expect(await readFile(path.join(pulled.rootfs, 'common'), 'utf8')).toBe('both');
    // The index digest finds the same image, locally.
    expect((await store.get(image.digest))?.digest).toBe(pulled.digest);
    expect((await store.pull(`${repo}@${image.digest}`)).digest).toBe(pulled.digest);
  });

  it('refuses an index without this host platform, and a single image of another arch', async () => {
    const other = hostPlatform().architecture === 'amd64' ? 's390x' : 'amd64';
    const { ref } = await push({ layers: [[{ path: 'f' }]], platforms: [{ architecture: other }] });
    const { store } = await newStore();
    const err = await rejection(store.pull(ref));
    expect(err.code).toBe('unsupported');
    expect(err.message).toContain(`linux/${other}`);
    const single = await push({ layers: [[{ path: 'f' }]], architecture: other });
    expect((await rejection(store.pull(single.ref))).code).toBe('unsupported');
  });

  it('pulls Docker schema 2 images and manifest lists', async () => {
    const { image, ref } = await push({
      format: 'docker',
      layers: [busyboxLayer(['sh'])],
      config: { Cmd: ['sh'] },
    });
    expect(image.top.mediaType).toBe('application/vnd.docker.distribution.manifest.v2+json');
    const { store } = await newStore();
    const pulled = await store.pull(ref);
    expect(pulled.config.cmd).toEqual(['sh']);
    expect(existsSync(path.join(pulled.rootfs, 'bin/busybox'))).toBe(true);

    const list = await push({
      format: 'docker',
      compression: 'none',
      layers: [[{ path: 'plain', content: 'uncompressed layer' }]],
      platforms: [{ architecture: 'arm64' }, { architecture: 'amd64' }],
    });
    const fromList = await store.pull(list.ref);
    expect(fromList.digest).toBe(list.image.hostDigest);
    expect(await readFile(path.join(fromList.rootfs, 'plain'), 'utf8')).toBe('uncompressed layer');
  });

  it('applies whiteouts, opaque dirs, hard links and symlinks across layers', async () => {
    const { ref } = await push({
      layers: [
        [
          { path: 'etc/remove-me', content: 'x' },
          { path: 'etc/keep', content: 'keep' },
          { path: 'data/old1', content: '1' },
          { path: 'data/old2/x', content: '2' },
          { path: 'usr/bin/tool', content: 'tool', mode: 0o755, uid: 1000, gid: 1000 },
        ],
        [
          { path: 'etc/.wh.remove-me' },
          { path: 'data/.wh..wh..opq' },
          { path: 'data/new', content: 'new' },
          { path: 'usr/bin/tool2', type: 'link', target: 'usr/bin/tool' },
          { path: 'bin', type: 'symlink', target: 'usr/bin' },
        ],
      ],
    });
    const { store } = await newStore();
    const { rootfs } = await store.pull(ref);
    expect(await readdir(path.join(rootfs, 'etc'))).toEqual(['keep']);
    expect(await readdir(path.join(rootfs, 'data'))).toEqual(['new']);
    const tool = await stat(path.join(rootfs, 'usr/bin/tool'));
    expect((await stat(path.join(rootfs, 'usr/bin/tool2'))).ino).toBe(tool.ino);
    // Shifted into the machines' id range: machine uid 1000 is host uid 201000.
    if (process.getuid?.() === 0) {
      expect([tool.uid, tool.gid]).toEqual([201_000, 201_000]);
      const root = await stat(rootfs);
      expect([root.uid, root.gid]).toEqual([200_000, 200_000]);
      const implicit = await stat(path.join(rootfs, 'usr'));
      expect(implicit.uid).toBe(200_000);
    }
    expect(await readlink(path.join(rootfs, 'bin'))).toBe('usr/bin');
  });
});

describe('hostile and broken images', () => {
  it('confines a hostile layer and refuses one that climbs out', async () => {
    const sentinel = `pier-escape-${randomBytes(6).toString('hex')}`;
    const { ref } = await push({
      layers: [
        [
          { path: 'evil', type: 'symlink', target: '/' },
          { path: `evil/tmp/${sentinel}-via-link`, content: 'pwned' },
          { path: `/tmp/${sentinel}-absolute`, content: 'pwned' },
        ],
      ],
    });
    const { store } = await newStore();
    const pulled = await store.pull(ref);
    expect(existsSync(`/tmp/${sentinel}-via-link`)).toBe(false);
    expect(existsSync(`/tmp/${sentinel}-absolute`)).toBe(false);
    expect(await readdir(path.join(pulled.rootfs, 'tmp'))).toEqual([
      `${sentinel}-absolute`,
      `${sentinel}-via-link`,
    ]);

    const climbing = await push({
      layers: [[{ path: `../../../../../../tmp/${sentinel}-dotdot`, content: 'x' }]],
    });
    const fresh = await newStore();
    const err = await rejection(fresh.store.pull(climbing.ref));
    expect(err.code).toBe('unsupported');
    expect(err.message).toMatch(/outside the image root/);
    expect(existsSync(`/tmp/${sentinel}-dotdot`)).toBe(false);
    expect(await leftovers(fresh.dir)).toEqual({ tmpBlobs: [], roots: [], images: [] });
  });

  it('fails with digest-mismatch on a tampered blob and keeps nothing', async () => {
    const { image, ref } = await push({ layers: [[{ path: 'f', content: 'original content' }]] });
    const manifest = JSON.parse(image.manifests[0]!.body.toString());
    const layer: string = manifest.layers[0].digest;
    const file = env.registry.blobFile(layer);
    const bytes = await readFile(file);
    // Same size, other bytes: the registry serves its file as it is.
    bytes[bytes.length - 10] = bytes[bytes.length - 10]! ^ 0xff;
    await writeFile(file, bytes);
    const { store, dir } = await newStore();
    const err = await rejection(store.pull(ref));
    expect(err.code).toBe('digest-mismatch');
    expect(err.message).toContain(layer);
    expect(existsSync(path.join(dir, 'blobs/sha256', layer.slice(7)))).toBe(false);
    expect(await leftovers(dir)).toEqual({ tmpBlobs: [], roots: [], images: [] });
  });

  it('refuses a tar bomb past the unpacked cap and keeps nothing, blobs included', async () => {
    const MIB = 1024 * 1024;
    const { image, ref } = await push({ layers: [zeroFileLayer('zeros', 100 * MIB)] });
    const { store, dir } = await newStore({
      limits: { maxUnpackedBytes: MIB, maxEntries: 50, maxDownloadBytes: MIB },
    });
    const err = await rejection(store.pull(ref));
    expect(err.code).toBe('too-large');
    expect(err.message).toMatch(/PIER_IMAGE_MAX_UNPACKED_GB/);
    expect(await leftovers(dir)).toEqual({ tmpBlobs: [], roots: [], images: [] });
    for (const digest of image.blobs.keys())
      expect(existsSync(path.join(dir, 'blobs/sha256', digest.slice(7)))).toBe(false);
  });

  it('says not-found for an unknown repository, tag or digest', async () => {
    const { repo } = await push({ layers: [[{ path: 'f' }]] });
    const { store } = await newStore();
    expect((await rejection(store.pull(`${env.registry.host}/nobody-here:1`))).code).toBe(
      'not-found',
    );
    expect((await rejection(store.pull(`${repo}:no-such-tag`))).code).toBe('not-found');
    expect((await rejection(store.pull(`${repo}@sha256:${'a'.repeat(64)}`))).code).toBe(
      'not-found',
    );
  });

  it('says unreachable for a registry nobody listens on', async () => {
    const port = await freePort();
    // Trusted (it is on loopback), so the pull gets as far as connecting.
    const guard = new OutboundGuard({ trusted: [`127.0.0.1:${port}`] });
    const { store } = await newStore({ guard });
    const err = await rejection(store.pull(`127.0.0.1:${port}/app:1`));
    expect(err.code).toBe('unreachable');
    expect(err.message).toContain(`127.0.0.1:${port}`);
  });

  it('says bad-reference for malformed references', async () => {
    const { store } = await newStore();
    for (const ref of [
      '',
      'UPPER/case',
      'app@sha256:abc',
      'app:bad tag',
      'a'.repeat(513),
      'host:99999/app',
    ]) {
      expect((await rejection(store.pull(ref))).code).toBe('bad-reference');
    }
  });
});
