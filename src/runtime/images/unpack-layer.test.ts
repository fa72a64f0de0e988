/**
 * applyLayer on layers built in the test: OCI whiteouts, links, metadata, skipped devices,
 * hostile layers that try to write (or delete, or link) outside the root, and layers
 * that would fill the host (tar bombs, inode bombs) against an unpack budget.
 */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import {
  lstat,
  mkdir,
  mkdtemp,
  readFile,
  readdir,
  readlink,
  rm,
  stat,
  writeFile,
} from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { sha256, tarLayer, zeroFileLayer, type LayerEntry } from './build.test-helper.js';
import { ImageError } from './errors.js';
import { UnpackBudget, type ImageLimits } from './limits.js';
import { applyLayer } from './unpack-layer.js';

let work: string;
let root: string;
const asRoot = process.getuid?.() === 0;

beforeEach(async () => {
  work ??= await mkdtemp(path.join(os.tmpdir(), 'pier-unpack-'));
  root = path.join(work, `root-${randomBytes(4).toString('hex')}`);
  await mkdir(root);
});
afterAll(async () => {
  if (work) await rm(work, { recursive: true, force: true });
});

/** Writes a layer to a file and applies it to `root`. */
async function apply(
  entries: LayerEntry[] | Buffer,
  opts: { gzip?: boolean; diffId?: string; budget?: UnpackBudget } = {},
) {
  const tar = Buffer.isBuffer(entries) ? entries : tarLayer(entries);
  const file = path.join(work, `layer-${randomBytes(4).toString('hex')}`);
  await writeFile(file, opts.gzip === false ? tar : gzipSync(tar));
  return applyLayer(file, {
    root,
    layer: 'sha256:test',
    ...(opts.diffId ? { diffId: opts.diffId } : {}),
    ...(opts.budget ? { budget: opts.budget } : {}),
  });
}

async function tree(dir: string, prefix = ''): Promise<string[]> {
  const out: string[] = [];
  for (const e of (await readdir(dir, { withFileTypes: true })).sort((a, b) =>
    a.name.localeCompare(b.name),
  )) {
    const rel = `${prefix}${e.name}`;
    out.push(e.isDirectory() ? `${rel}/` : rel);
    if (e.isDirectory()) out.push(...(await tree(path.join(dir, e.name), `${rel}/`)));
  }
  return out;
}

describe('layers', () => {
  it('creates files, dirs, symlinks and hard links with their metadata', async () => {
    const mtime = new Date('2020-02-02T02:02:02Z');
    await apply([
      { path: './', type: 'dir', mode: 0o755 },
      { path: 'usr/', type: 'dir', mode: 0o751, mtime },
      { path: 'usr/bin/tool', content: 'tool', mode: 0o4755, uid: 0, gid: 0, mtime },
      { path: 'home/app/secret', content: 's', mode: 0o600, uid: 1000, gid: 1001 },
      { path: 'usr/bin/tool-link', type: 'link', target: 'usr/bin/tool' },
      { path: 'bin', type: 'symlink', target: 'usr/bin', uid: 1000, gid: 1000 },
      { path: 'etc/abs', type: 'symlink', target: '/etc/passwd' },
      { path: 'implicit/parent/file', content: 'x' },
    ]);
    expect(await readFile(path.join(root, 'usr/bin/tool'), 'utf8')).toBe('tool');
    const tool = await stat(path.join(root, 'usr/bin/tool'));
    expect(tool.mode & 0o7777).toBe(0o4755);
    expect(tool.mtime.getTime()).toBe(mtime.getTime());
    expect((await stat(path.join(root, 'usr'))).mode & 0o7777).toBe(0o751);
    expect((await stat(path.join(root, 'usr'))).mtime.getTime()).toBe(mtime.getTime());
    expect((await stat(path.join(root, 'home/app/secret'))).mode & 0o777).toBe(0o600);
    if (asRoot) {
      const s = await stat(path.join(root, 'home/app/secret'));
      expect([s.uid, s.gid]).toEqual([1000, 1001]);
      expect((await lstat(path.join(root, 'bin'))).uid).toBe(1000);
    }
    expect((await stat(path.join(root, 'usr/bin/tool-link'))).ino).toBe(tool.ino);
    expect(await readlink(path.join(root, 'bin'))).toBe('usr/bin');
    expect(await readlink(path.join(root, 'etc/abs'))).toBe('/etc/passwd');
    expect(await readFile(path.join(root, 'implicit/parent/file'), 'utf8')).toBe('x');
  });

  it('applies whiteouts and opaque directories to lower layers only', async () => {
    await apply([
      { path: 'etc/remove-me', content: 'old' },
      { path: 'etc/keep', content: 'keep' },
      { path: 'gone/deep/file', content: 'x' },
      { path: 'opq/a', content: 'a' },
      { path: 'opq/sub/b', content: 'b' },
      { path: 'opq/sub2/c', content: 'c' },
    ]);
    await apply([
      { path: 'etc/.wh.remove-me' },
      { path: '.wh.gone' },
      { path: 'opq/new', content: 'new' }, // before the marker: must survive it
      { path: 'opq/.wh..wh..opq' },
      { path: 'opq/sub2/d', content: 'd' }, // after it: survives, sub2's old child does not
      { path: 'missing/.wh.nothing' }, // whiteout in a dir that does not exist: nothing to do
    ]);
    expect(await tree(root)).toEqual([
      'etc/',
      'etc/keep',
      'opq/',
      'opq/new',
      'opq/sub2/',
      'opq/sub2/d',
    ]);
  });

  it('replaces entries of lower layers, merging directories', async () => {
    await apply([
      { path: 'a/', type: 'dir', mode: 0o700 },
      { path: 'a/old', content: 'old' },
      { path: 'b/', type: 'dir' },
      { path: 'b/x', content: 'x' },
      { path: 'c', content: 'file' },
    ]);
    await apply([
      { path: 'a/', type: 'dir', mode: 0o755 },
      { path: 'a/new', content: 'new' },
      { path: 'b', content: 'now a file' },
      { path: 'c', type: 'symlink', target: 'a' },
    ]);
    expect(await tree(root)).toEqual(['a/', 'a/new', 'a/old', 'b', 'c']);
    expect((await stat(path.join(root, 'a'))).mode & 0o777).toBe(0o755);
    expect(await readFile(path.join(root, 'b'), 'utf8')).toBe('now a file');
    expect(await readlink(path.join(root, 'c'))).toBe('a');
  });

  it('skips devices and FIFOs without creating them', async () => {
    const r = await apply([
      { path: 'dev/', type: 'dir' },
      { path: 'dev/null', type: 'char' },
      { path: 'dev/sda', type: 'block' },
      { path: 'dev/fifo', type: 'fifo' },
    ]);
    expect(r.skipped).toBe(3);
    expect(await readdir(path.join(root, 'dev'))).toEqual([]);
  });

  it('reads uncompressed tar, empty layers, and long (pax) names', async () => {
    const long = `${'d'.repeat(120)}/${'f'.repeat(150)}`;
    await apply([{ path: long, content: 'long' }], { gzip: false });
    expect(await readFile(path.join(root, long), 'utf8')).toBe('long');
    await apply(Buffer.alloc(1024), { gzip: false }); // Docker's empty layer
    await apply(Buffer.alloc(0));
  });

  it('hashes but does not parse what follows the end of the archive', async () => {
    const tar = Buffer.concat([
      tarLayer([{ path: 'f', content: 'x' }]),
      randomBytes(4 * 1024 * 1024),
    ]);
    await apply(tar, { gzip: false, diffId: sha256(tar) });
    expect(await readFile(path.join(root, 'f'), 'utf8')).toBe('x');
  });

  it('verifies the diff id (the uncompressed digest)', async () => {
    const entries = [{ path: 'f', content: 'x' }];
    await apply(entries, { diffId: sha256(tarLayer(entries)) });
    await expect(apply(entries, { diffId: `sha256:${'0'.repeat(64)}` })).rejects.toMatchObject({
      code: 'digest-mismatch',
    });
  });

  it('refuses corrupt archives and zstd layers', async () => {
    const tar = tarLayer([{ path: 'f', content: 'x'.repeat(2000) }]);
    tar[100] = tar[100]! ^ 0xff; // inside the header: the checksum no longer matches
    await expect(apply(tar, { gzip: false })).rejects.toMatchObject({ code: 'unsupported' });
    const gz = gzipSync(tarLayer([{ path: 'f', content: 'x' }])).subarray(0, 20);
    await expect(apply(gz, { gzip: false })).rejects.toMatchObject({ code: 'unsupported' });
    const zstd = Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0, 0, 0, 0]);
    await expect(apply(zstd, { gzip: false })).rejects.toThrow(/zstd/);
  });

  it('fails, and never waits forever, when the gzip breaks in the middle of a file', async () => {
    const gz = gzipSync(tarLayer([{ path: 'big', content: randomBytes(1024 * 1024) }]));
    await expect(apply(gz.subarray(0, gz.length >> 1), { gzip: false })).rejects.toMatchObject({
      code: 'unsupported',
    });
  });
});

describe('hostile layers', () => {
  // Everything a hostile layer aims at lives in `outside`, a sibling of the root.
  let outside: string;
  beforeEach(async () => {
    outside = path.join(work, `outside-${randomBytes(4).toString('hex')}`);
    await mkdir(outside);
    await writeFile(path.join(outside, 'victim'), 'intact');
  });
  const rel = () => path.relative(root, outside); // "../outside-…"

  it('refuses names that climb out with ..', async () => {
    for (const name of [`${rel()}/escape`, '../escape', 'a/../../escape', './../escape']) {
      const err = await apply([{ path: name, content: 'pwned' }]).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ImageError);
      expect(err).toMatchObject({ code: 'unsupported' });
    }
    expect(await readdir(outside)).toEqual(['victim']);
    expect(existsSync(path.join(work, 'escape'))).toBe(false);
  });

  it('keeps absolute names inside the root', async () => {
    await apply([{ path: `${outside}/abs`, content: 'confined' }]);
    expect(await readdir(outside)).toEqual(['victim']);
    expect(await readFile(path.join(root, outside, 'abs'), 'utf8')).toBe('confined');
  });

  it('resolves symlinked parents inside the root', async () => {
    await apply([
      { path: 'evil', type: 'symlink', target: '/' },
      { path: 'up', type: 'symlink', target: '../../../../../../../..' },
      { path: 'out', type: 'symlink', target: outside },
      { path: 'rel', type: 'symlink', target: rel() },
      { path: 'gone', type: 'symlink', target: 'missing/../out' },
    ]);
    await apply([
      { path: `evil${outside}/via-root`, content: '1' },
      { path: `up${outside}/via-dotdot`, content: '2' },
      { path: 'out/via-abs', content: '3' },
      { path: 'rel/via-rel', content: '4' },
      { path: 'gone/via-missing', content: '5' },
      { path: 'out/.wh.victim' }, // a whiteout through a symlink deletes inside only
      { path: 'out/', type: 'dir', mode: 0o777 }, // replaces the link, never chmods the target
    ]);
    expect(await readdir(outside)).toEqual(['victim']);
    expect(await readFile(path.join(outside, 'victim'), 'utf8')).toBe('intact');
    expect((await stat(outside)).mode & 0o777).not.toBe(0o777);
    const inside = path.join(root, outside);
    expect((await readdir(inside)).sort()).toEqual([
      'via-abs',
      'via-dotdot',
      'via-missing',
      'via-root',
    ]);
    expect(
      await readFile(path.join(root, rel().replace(/^(\.\.\/)+/, ''), 'via-rel'), 'utf8'),
    ).toBe('4');
  });

  it('never hard-links to files outside the root', async () => {
    for (const target of [path.join(outside, 'victim'), `${rel()}/victim`]) {
      const err = await apply([{ path: 'stolen', type: 'link', target }]).catch((e: unknown) => e);
      expect(err).toMatchObject({ code: 'unsupported' });
    }
    await apply([{ path: 'out', type: 'symlink', target: outside }]);
    const err = await apply([{ path: 'stolen', type: 'link', target: 'out/victim' }]).catch(
      (e: unknown) => e,
    );
    expect(err).toMatchObject({ code: 'unsupported' });
    expect((await stat(path.join(outside, 'victim'))).nlink).toBe(1);
  });

  it('refuses whiteouts that name . or ..', async () => {
    for (const name of ['.wh...', 'sub/.wh..']) {
      await mkdir(path.join(root, 'sub'), { recursive: true });
      const err = await apply([{ path: name }]).catch((e: unknown) => e);
      expect(err).toMatchObject({ code: 'unsupported' });
    }
    expect(existsSync(root)).toBe(true);
    expect(await readdir(outside)).toEqual(['victim']);
  });

  it('refuses a file used as a directory and symlink loops', async () => {
    await expect(
      apply([
        { path: 'f', content: 'x' },
        { path: 'f/under', content: 'y' },
      ]),
    ).rejects.toMatchObject({
      code: 'unsupported',
    });
    await expect(
      apply([
        { path: 'loop', type: 'symlink', target: 'loop' },
        { path: 'loop/x', content: 'y' },
      ]),
    ).rejects.toThrow(/symlink loop/);
  });
});

describe('caps on one image', () => {
  const MIB = 1024 * 1024;
  const small: ImageLimits = { maxUnpackedBytes: MIB, maxEntries: 50, maxDownloadBytes: MIB };
  const budget = (limits: Partial<ImageLimits> = {}) =>
    new UnpackBudget('img', { ...small, ...limits });

  it('stops a tar bomb at its header, before writing a byte of it', async () => {
    const bomb = zeroFileLayer('zeros', 100 * MIB); // ~100 KiB of gzip
    expect(bomb.bytes.length).toBeLessThan(MIB);
    const started = Date.now();
    const err = await apply(bomb.bytes, { gzip: false, budget: budget() }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ImageError);
    expect(err).toMatchObject({ code: 'too-large' });
    expect((err as Error).message).toMatch(/more than 1 MiB.*PIER_IMAGE_MAX_UNPACKED_GB/);
    expect(Date.now() - started).toBeLessThan(2000);
    expect(await readdir(root)).toEqual([]);
  });

  it('stops a layer of many empty files at the entry cap', async () => {
    const files = Array.from({ length: 1000 }, (_, i): LayerEntry => ({ path: `f${i}` }));
    const err = await apply(files, { budget: budget() }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'too-large' });
    expect((err as Error).message).toMatch(/more than 50 .*PIER_IMAGE_MAX_ENTRIES/);
    expect((await readdir(root)).length).toBe(50);
  });

  it('counts hard links once, and adds up over the layers of an image', async () => {
    const shared = budget();
    const big = Buffer.alloc(600 * 1024, 'a');
    await apply(
      [
        { path: 'big', content: big },
        ...Array.from({ length: 20 }, (_, i): LayerEntry => ({
          path: `link${i}`,
          type: 'link',
          target: 'big',
        })),
      ],
      { budget: shared },
    );
    expect((await stat(path.join(root, 'link19'))).nlink).toBe(21);
    // A second layer of the same image: 600 KiB more passes the 1 MiB cap.
    await expect(
      apply([{ path: 'other', content: big }], { budget: shared }),
    ).rejects.toMatchObject({ code: 'too-large' });
    expect(existsSync(path.join(root, 'other'))).toBe(false);
  });

  it('bounds the uncompressed tar stream, junk after the archive included', async () => {
    const tar = Buffer.concat([tarLayer([{ path: 'f', content: 'x' }]), Buffer.alloc(8 * MIB)]);
    // 1 MiB of files, 1 entry: 1 MiB + 4 KiB + the 16 MiB margin is not enough for 24 MiB.
    const err = await apply(Buffer.concat([tar, Buffer.alloc(16 * MIB)]), {
      budget: budget({ maxEntries: 1 }),
    }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'too-large' });
    // Within the caps, the same kind of layer still unpacks.
    await apply(tar, { budget: budget({ maxEntries: 1 }) });
    expect(await readFile(path.join(root, 'f'), 'utf8')).toBe('x');
  });
});
