import {
  link,
  mkdir,
  mkdtemp,
  readdir,
  readlink,
  rm,
  stat,
  symlink,
  writeFile,
} from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { codeOf, storagePoolContract, volumeName } from './contract.test-helper.js';
import { DirectoryPool } from './directory-pool.js';

function tempDir(): Promise<string> {
  return mkdtemp(path.join(os.tmpdir(), 'pier-pool-dir-'));
}

storagePoolContract('DirectoryPool', async () => {
  const dir = await tempDir();
  const pool = await DirectoryPool.open({ dir });
  return {
    pool,
    cleanup: async () => {
      await pool.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
});

describe('DirectoryPool on disk', () => {
  let dir: string;
  let pool: DirectoryPool;

  beforeAll(async () => {
    dir = await tempDir();
    pool = await DirectoryPool.open({ dir });
  });

  afterAll(async () => {
    await pool.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('keeps volumes in <dir>/volumes, which others may pass through but not list', async () => {
    expect(pool.root).toBe(path.join(dir, 'volumes'));
    expect(pool.kind).toBe('directory');
    expect((await stat(pool.root)).mode & 0o777).toBe(0o711);
  });

  it('accepts a quota but does not enforce it (and says so with null)', async () => {
    const name = volumeName();
    const info = await pool.create(name, { quotaBytes: 1024 * 1024 });
    expect(info.quotaBytes).toBeNull();
    await writeFile(path.join(info.path, 'big'), Buffer.alloc(2 * 1024 * 1024, 1));
    await pool.setQuota(name, 4096);
    expect((await pool.info(name))?.quotaBytes).toBeNull();
  });

  it('clears leftovers of an interrupted create or destroy when opened again', async () => {
    const keep = volumeName();
    await pool.create(keep);
    await mkdir(path.join(pool.root, '.tmp-half-made-0123'), { recursive: true });
    await mkdir(path.join(pool.root, '.trash-half-gone-4567', 'x'), { recursive: true });
    const again = await DirectoryPool.open({ dir });
    expect((await readdir(pool.root)).filter((e) => e.startsWith('.'))).toEqual([]);
    expect(await again.list()).toContain(keep);
  });

  it('copies hard links as links and keeps symlinks', async () => {
    const src = volumeName();
    const { path: p } = await pool.create(src);
    await writeFile(path.join(p, 'a'), 'data');
    await link(path.join(p, 'a'), path.join(p, 'b'));
    await symlink('a', path.join(p, 'c'));
    const copy = await pool.snapshot(src, volumeName());
    const [a, b] = await Promise.all([
      stat(path.join(copy.path, 'a')),
      stat(path.join(copy.path, 'b')),
    ]);
    expect(a.ino).toBe(b.ino);
    expect(await readlink(path.join(copy.path, 'c'))).toBe('a');
  });

  it('refuses work once closed', async () => {
    const d = await tempDir();
    const p = await DirectoryPool.open({ dir: d });
    await p.close();
    expect(await codeOf(p.list())).toBe('backend');
    await rm(d, { recursive: true, force: true });
  });
});
