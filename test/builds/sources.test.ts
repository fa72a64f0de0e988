/**
 * Source uploads (CONTRACT 7, issue #25 item 1) on a real platform: a good archive is
 * kept with its size and digest; what is not a gzip'd tar, or holds absolute paths, `..`,
 * devices or links that leave the tree, is refused naming the entry; the size cap, the
 * entry cap and a zip bomb answer 413 `too-large`; another organization's app is 404.
 */
import { createHash } from 'node:crypto';
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tarLayer } from '../../src/runtime/images/build.test-helper.js';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';
import { sourceArchive, uploadSource } from './archive.js';

let tp: TestPlatform;
let org: TestOrg;

beforeAll(async () => {
  tp = await startTestPlatform({ buildSourceMaxMb: 1, buildSourceMaxFiles: 100 });
  org = await tp.createOrg();
  expect(
    (await tp.request('POST', '/v1/apps', { token: org.token, body: { name: 'src-app' } })).status,
  ).toBe(201);
}, 60_000);

afterAll(async () => {
  await tp?.close();
});

const upload = (bytes: Buffer, token = org.token, app = 'src-app') =>
  uploadSource(tp.url, token, app, bytes);

describe('POST /v1/apps/:name/sources', () => {
  it('keeps a gzip’d tar with its size, digest and entry count', async () => {
    const bytes = sourceArchive([
      { path: 'Dockerfile', content: 'FROM scratch\n' },
      { path: 'src/', type: 'dir' },
      { path: 'src/a.txt', content: 'a' },
      { path: 'src/link', type: 'symlink', target: 'a.txt' },
      { path: 'up', type: 'symlink', target: 'src/../src/a.txt' },
    ]);
    const res = await upload(bytes);
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({
      app: 'src-app',
      sizeBytes: bytes.length,
      sha256: createHash('sha256').update(bytes).digest('hex'),
      files: 5,
    });
    expect(res.body.id).toMatch(/^src-/);
    const kept = await readdir(path.join(tp.dataDir, 'builds', 'sources'));
    expect(kept).toContain(`${res.body.id}.tar.gz`);
  });

  it('refuses what is not a gzip’d tar', async () => {
    for (const bytes of [Buffer.from('not gzip at all'), gzipSync(Buffer.from('x'.repeat(600)))]) {
      const res = await upload(bytes);
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('bad-request');
    }
  });

  it('refuses absolute paths, "..", devices and links out of the tree, naming the entry', async () => {
    const cases: [Parameters<typeof tarLayer>[0], string][] = [
      [[{ path: '/etc/evil', content: 'x' }], '/etc/evil'],
      [[{ path: 'a/../../escape', content: 'x' }], 'a/../../escape'],
      [[{ path: 'dev-null', type: 'char' }], 'dev-null'],
      [[{ path: 'fifo', type: 'fifo' }], 'fifo'],
      [[{ path: 'out', type: 'symlink', target: '../../etc/passwd' }], 'out'],
      [[{ path: 'abs', type: 'symlink', target: '/etc/passwd' }], 'abs'],
      // Each link alone stays inside; resolved as the kernel does, b leaves the tree.
      [
        [
          { path: 'a', type: 'symlink', target: '.' },
          { path: 'b', type: 'symlink', target: 'a/..' },
        ],
        'b',
      ],
      [[{ path: 'hard', type: 'link', target: '../outside' }], 'hard'],
    ];
    for (const [entries, entry] of cases) {
      const res = await upload(gzipSync(tarLayer(entries)));
      expect(res.status, entry).toBe(400);
      expect(res.body.code).toBe('bad-request');
      expect(res.body.error).toContain(entry);
    }
  });

  it('answers 413 too-large past the size cap, the entry cap, and for a zip bomb', async () => {
    const big = Buffer.alloc(1.5 * 1024 * 1024);
    for (let i = 0; i < big.length; i += 4) big.writeUInt32LE((i * 2654435761) >>> 0, i);
    const tooBig = await upload(sourceArchive([{ path: 'noise', content: big }]));
    expect(tooBig.status).toBe(413);
    expect(tooBig.body.code).toBe('too-large');

    const many = Array.from({ length: 101 }, (_, i) => ({ path: `f${i}`, content: '' }));
    const tooMany = await upload(sourceArchive(many));
    expect(tooMany.status).toBe(413);

    // 64 MiB of zeros gzip to ~64 KiB: under the size cap, far past 10x it unpacked.
    const bomb = await upload(
      sourceArchive([{ path: 'zeros', content: Buffer.alloc(64 * 1024 * 1024) }]),
    );
    expect(bomb.status).toBe(413);
    expect(bomb.body.code).toBe('too-large');
    // Nothing of a refused upload stays on disk.
    const kept = await readdir(path.join(tp.dataDir, 'builds', 'sources'));
    expect(kept.filter((n) => n.endsWith('.part'))).toEqual([]);
  });

  it("answers another organization's app as missing", async () => {
    const other = await tp.createOrg();
    const res = await upload(sourceArchive({ 'index.html': 'hi' }), other.token);
    expect(res.status).toBe(404);
  });
});
