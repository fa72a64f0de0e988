/**
 * The behaviour every storage pool must have, as one suite that each pool's test file runs
 * against its own pool: the directory pool always, the btrfs pool where the host allows.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, readdir, readFile, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PoolError, type StoragePool } from './pool.js';

/** What a pool's test file hands the contract. */
export interface PoolHarness {
  pool: StoragePool;
  /** Makes usedBytes current (btrfs counts qgroups at transaction commit). */
  settle?(): Promise<void>;
  cleanup(): Promise<void>;
}

let counter = 0;
/** A volume name no other test uses. */
export function volumeName(prefix = 'v'): string {
  return `${prefix}-${process.pid}-${++counter}-${randomBytes(3).toString('hex')}`;
}

/** The PoolError code a promise fails with, or 'resolved'. */
export async function codeOf(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (err) {
    if (err instanceof PoolError) return err.code;
    throw err;
  }
  return 'resolved';
}

/** Runs the storage pool contract against the pool `open` builds. */
export function storagePoolContract(label: string, open: () => Promise<PoolHarness>): void {
  describe(`${label} (storage pool contract)`, () => {
    let h: PoolHarness | undefined;
    let pool: StoragePool;

    beforeAll(async () => {
      h = await open();
      pool = h.pool;
    });

    afterAll(async () => {
      await h?.cleanup();
    });

    it('creates an empty volume under its root, owned as asked, mode 0700', async () => {
      const name = volumeName();
      const info = await pool.create(name, { owner: { uid: 4321, gid: 4322 } });
      expect(info.name).toBe(name);
      expect(info.path).toBe(path.join(pool.root, name));
      expect(await readdir(info.path)).toEqual([]);
      const st = await stat(info.path);
      expect([st.uid, st.gid, st.mode & 0o777]).toEqual([4321, 4322, 0o700]);
      expect(await pool.list()).toContain(name);
      expect(await pool.info(name)).toMatchObject({ name, path: info.path });
    });

    it('snapshots a volume into an independent copy', async () => {
      const src = volumeName('src');
      const { path: srcPath } = await pool.create(src);
      await mkdir(path.join(srcPath, 'sub'));
      await writeFile(path.join(srcPath, 'sub', 'a.txt'), 'before');
      await writeFile(path.join(srcPath, 'shared.txt'), 'same');

      const copy = volumeName('copy');
      const info = await pool.snapshot(src, copy);
      expect(info.path).toBe(path.join(pool.root, copy));
      expect(await readFile(path.join(info.path, 'sub', 'a.txt'), 'utf8')).toBe('before');
      expect(await readFile(path.join(info.path, 'shared.txt'), 'utf8')).toBe('same');

      // Writes on either side stay on that side.
      await writeFile(path.join(srcPath, 'sub', 'a.txt'), 'source changed');
      await writeFile(path.join(srcPath, 'only-source'), 'x');
      await writeFile(path.join(info.path, 'shared.txt'), 'copy changed');
      await writeFile(path.join(info.path, 'only-copy'), 'y');
      expect(await readFile(path.join(info.path, 'sub', 'a.txt'), 'utf8')).toBe('before');
      expect(await readFile(path.join(srcPath, 'shared.txt'), 'utf8')).toBe('same');
      expect((await readdir(srcPath)).sort()).toEqual(['only-source', 'shared.txt', 'sub']);
      expect((await readdir(info.path)).sort()).toEqual(['only-copy', 'shared.txt', 'sub']);

      // The source can go and the copy stays whole.
      await pool.destroy(src);
      expect(await readFile(path.join(info.path, 'sub', 'a.txt'), 'utf8')).toBe('before');
      expect(await pool.list()).toEqual(expect.arrayContaining([copy]));
    });

    it('keeps owners and modes in a snapshot', async () => {
      const src = volumeName();
      const { path: p } = await pool.create(src, { owner: { uid: 1234, gid: 1235 } });
      await writeFile(path.join(p, 'secret'), 's', { mode: 0o600 });
      const copy = await pool.snapshot(src, volumeName());
      const top = await stat(copy.path);
      const file = await stat(path.join(copy.path, 'secret'));
      expect([top.uid, top.gid, top.mode & 0o777]).toEqual([1234, 1235, 0o700]);
      expect(file.mode & 0o777).toBe(0o600);
    });

    it('destroys a volume and leaves nothing behind; destroying again is fine', async () => {
      const name = volumeName();
      const { path: p } = await pool.create(name);
      await mkdir(path.join(p, 'deep', 'er'), { recursive: true });
      await writeFile(path.join(p, 'deep', 'er', 'f'), randomBytes(1024 * 1024));
      await pool.destroy(name);
      expect(await pool.list()).not.toContain(name);
      expect(await pool.info(name)).toBeUndefined();
      // Nothing under the root mentions it: no volume, no temporary or trash entry.
      expect((await readdir(pool.root)).filter((e) => e.includes(name))).toEqual([]);
      await pool.destroy(name);
      await pool.destroy(volumeName('never-made'));
    });

    it('refuses names that are not volume names, before touching anything', async () => {
      const bad = ['../x', 'A', '', 'a/b', '.tmp-x', '-a', 'a_b', 'a.b', 'x'.repeat(102), 'é'];
      const { path: okPath } = await pool.create(volumeName());
      const ok = path.basename(okPath);
      for (const name of bad) {
        expect(await codeOf(pool.create(name)), name).toBe('invalid-name');
        expect(await codeOf(pool.snapshot(ok, name)), name).toBe('invalid-name');
        expect(await codeOf(pool.snapshot(name, volumeName())), name).toBe('invalid-name');
        expect(await codeOf(pool.destroy(name)), name).toBe('invalid-name');
        expect(await codeOf(pool.info(name)), name).toBe('invalid-name');
        expect(await codeOf(pool.setQuota(name, null)), name).toBe('invalid-name');
      }
      expect(await codeOf(pool.create('x'.repeat(101)).then((v) => pool.destroy(v.name)))).toBe(
        'resolved',
      );
      expect((await readdir(pool.root)).filter((e) => e.startsWith('.'))).toEqual([]);
    });

    it('says exists and not-found', async () => {
      const name = volumeName();
      await pool.create(name);
      expect(await codeOf(pool.create(name))).toBe('exists');
      const other = volumeName();
      await pool.create(other);
      expect(await codeOf(pool.snapshot(name, other))).toBe('exists');
      const missing = volumeName('missing');
      expect(await codeOf(pool.snapshot(missing, volumeName()))).toBe('not-found');
      expect(await codeOf(pool.setQuota(missing, 1024 ** 3))).toBe('not-found');
      expect(await pool.info(missing)).toBeUndefined();
      expect(await pool.list()).not.toContain(missing);
    });

    it('lets exactly one of two simultaneous creates of a name win', async () => {
      const name = volumeName();
      const codes = await Promise.all([codeOf(pool.create(name)), codeOf(pool.create(name))]);
      expect(codes.sort()).toEqual(['exists', 'resolved']);
      const codes2 = await Promise.all([
        codeOf(pool.snapshot(name, `${name}-b`)),
        codeOf(pool.snapshot(name, `${name}-b`)),
      ]);
      expect(codes2.sort()).toEqual(['exists', 'resolved']);
    });

    it('lists volumes sorted, and only volumes', async () => {
      const names = [volumeName('l'), volumeName('l'), volumeName('l')];
      for (const n of names) await pool.create(n);
      const listed = await pool.list();
      expect(listed).toEqual([...listed].sort());
      expect(listed).toEqual(expect.arrayContaining(names));
      expect(listed.every((n) => /^[a-z0-9][a-z0-9-]*$/.test(n))).toBe(true);
    });

    it('reports usage of the whole pool', async () => {
      const u = await pool.usage();
      expect(u.kind).toBe(pool.kind);
      expect(u.totalBytes).toBeGreaterThan(0);
      expect(u.usedBytes).toBeGreaterThan(0);
      expect(u.freeBytes).toBeGreaterThan(0);
      expect(u.freeBytes).toBeLessThanOrEqual(u.totalBytes);
    });

    it('counts what a volume holds in usedBytes', async () => {
      const name = volumeName();
      const { path: p } = await pool.create(name);
      await writeFile(path.join(p, 'f'), randomBytes(4 * 1024 * 1024));
      await h?.settle?.();
      const info = await pool.info(name);
      expect(info?.usedBytes).toBeGreaterThanOrEqual(4 * 1024 * 1024);
      expect(info?.usedBytes).toBeLessThan(5 * 1024 * 1024);
    });
  });
}
