import { randomBytes } from 'node:crypto';
import { mkdir, open, readFile, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BtrfsPool } from './btrfs-pool.js';
import { btrfsSkipReason, forceCleanup, tempPoolDir } from './btrfs-env.test-helper.js';
import { filesystemSpace } from './disk-usage.js';
import { codeOf, storagePoolContract, volumeName } from './contract.test-helper.js';
import { loopDevicesOf } from './loop.js';
import { mountsAt } from './mounts.js';
import { asPoolError, isNoSpace } from './pool.js';
import { runTool } from './run.js';

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;
const skip = btrfsSkipReason();
if (skip) console.warn(`skipping the btrfs pool tests: ${skip}`);

async function fsUuid(image: string): Promise<string> {
  return (await runTool('blkid', ['-p', '-o', 'value', '-s', 'UUID', image])).stdout.trim();
}

/** Writes `bytes` of incompressible data to `file` in 8 MiB steps and fsyncs it. */
async function fill(file: string, bytes: number): Promise<void> {
  const chunk = randomBytes(8 * MiB);
  const handle = await open(file, 'w');
  try {
    for (let done = 0; done < bytes; done += chunk.length) {
      await handle.write(chunk, 0, Math.min(chunk.length, bytes - done));
    }
    await handle.sync();
  } finally {
    await handle.close();
  }
}

const ms = (start: bigint) => Number(process.hrtime.bigint() - start) / 1e6;

describe.skipIf(skip !== undefined)('BtrfsPool', () => {
  storagePoolContract('BtrfsPool on a loop-mounted image', async () => {
    const dir = await tempPoolDir('contract');
    try {
      const pool = await BtrfsPool.open({ dir, imageSizeBytes: 2 * GiB });
      return {
        pool,
        settle: async () => void (await runTool('btrfs', ['filesystem', 'sync', pool.root])),
        cleanup: async () => {
          await pool.close().catch(() => undefined);
          await forceCleanup(dir, [path.join(dir, 'pool.img')]);
        },
      };
    } catch (err) {
      await forceCleanup(dir, [path.join(dir, 'pool.img')]);
      throw err;
    }
  });

  describe('on its image', () => {
    let dir: string;
    let image: string;
    let pool: BtrfsPool;

    beforeAll(async () => {
      dir = await tempPoolDir('btrfs');
      image = path.join(dir, 'pool.img');
      pool = await BtrfsPool.open({ dir, imageSizeBytes: 4 * GiB });
    });

    afterAll(async () => {
      await pool?.close().catch(() => undefined);
      if (dir) await forceCleanup(dir, [image]);
    });

    it('mounts a sparse btrfs image at <dir>/mnt, with one loop device', async () => {
      expect(pool.kind).toBe('btrfs');
      expect(pool.root).toBe(path.join(dir, 'mnt'));
      expect(pool.imagePath).toBe(image);
      const mounts = await mountsAt(pool.root);
      expect(mounts.map((m) => m.fsType)).toEqual(['btrfs']);
      const devices = await loopDevicesOf(image);
      expect(devices).toEqual([mounts[0]?.source]);
      const st = await stat(image);
      expect(st.size).toBe(4 * GiB);
      expect(st.blocks * 512).toBeLessThan(st.size / 4); // sparse: only what was written
      expect((await stat(pool.root)).mode & 0o777).toBe(0o711);
    });

    it('makes a volume a subvolume with a qgroup limit, quickly', async () => {
      const name = volumeName();
      const start = process.hrtime.bigint();
      const info = await pool.create(name, { quotaBytes: 10 * GiB });
      const took = ms(start);
      console.log(`btrfs create with a quota: ${took.toFixed(1)} ms`);
      expect(info.quotaBytes).toBe(10 * GiB);
      expect((await stat(info.path)).ino).toBe(256);
      const listed = await runTool('btrfs', ['subvolume', 'list', pool.root]);
      expect(listed.stdout).toContain(`path ${name}\n`);
    });

    it('snapshots 1 GiB in well under a second, independent of size', async () => {
      const small = volumeName('small');
      await pool.create(small);
      await writeFile(path.join(pool.root, small, 'f'), 'tiny');
      const big = volumeName('big');
      await pool.create(big, { quotaBytes: 2 * GiB });
      await fill(path.join(pool.root, big, 'data'), GiB);
      await runTool('btrfs', ['filesystem', 'sync', pool.root]);

      let start = process.hrtime.bigint();
      await pool.snapshot(small, volumeName());
      const smallMs = ms(start);
      start = process.hrtime.bigint();
      const copy = await pool.snapshot(big, volumeName());
      const bigMs = ms(start);
      console.log(
        `btrfs snapshot: 1 GiB volume ${bigMs.toFixed(1)} ms, tiny volume ${smallMs.toFixed(1)} ms`,
      );
      expect(bigMs).toBeLessThan(5_000);
      // The copy keeps its source's limit and refers to the same 1 GiB, sharing its blocks.
      await runTool('btrfs', ['filesystem', 'sync', pool.root]);
      const info = await pool.info(copy.name);
      expect(info?.quotaBytes).toBe(2 * GiB);
      expect(info?.usedBytes).toBeGreaterThanOrEqual(GiB);
      expect((await stat(path.join(copy.path, 'data'))).size).toBe(GiB);
      const u = await pool.usage();
      expect(u.usedBytes).toBeLessThan(1.5 * GiB); // shared, not copied
      await pool.destroy(big);
      await pool.destroy(copy.name);
    }, 180_000);

    it('enforces a quota: writing past 50 MiB fails', async () => {
      const name = volumeName();
      const { path: p } = await pool.create(name, { quotaBytes: 50 * MiB });
      const err: unknown = await fill(path.join(p, 'f'), 100 * MiB).then(
        () => undefined,
        (e: unknown) => e,
      );
      // EDQUOT, which Node reports as "Unknown system error -122"; isNoSpace knows it.
      expect(err).toBeInstanceOf(Error);
      expect(isNoSpace(err)).toBe(true);
      expect(asPoolError(err).code).toBe('no-space');
      await pool.setQuota(name, null);
      expect((await pool.info(name))?.quotaBytes).toBeNull();
      await fill(path.join(p, 'f'), 100 * MiB); // no limit any more
      await pool.setQuota(name, 500 * MiB);
      expect((await pool.info(name))?.quotaBytes).toBe(500 * MiB);
    }, 60_000);

    it('sets a different limit on a snapshot when asked', async () => {
      const src = volumeName();
      await pool.create(src, { quotaBytes: 100 * MiB });
      const copy = await pool.snapshot(src, volumeName(), { quotaBytes: 300 * MiB });
      expect(copy.quotaBytes).toBe(300 * MiB);
      expect((await pool.info(src))?.quotaBytes).toBe(100 * MiB);
    });

    it('makes read-only snapshots, which can be destroyed and copied writable', async () => {
      const src = volumeName();
      const { path: p } = await pool.create(src);
      await writeFile(path.join(p, 'f'), 'v1');
      const ro = await pool.snapshot(src, volumeName(), { readOnly: true });
      const err = await writeFile(path.join(ro.path, 'f'), 'v2').catch(
        (e: NodeJS.ErrnoException) => e,
      );
      expect(err?.code).toBe('EROFS');
      const rw = await pool.snapshot(ro.name, volumeName());
      await writeFile(path.join(rw.path, 'f'), 'v2');
      expect(await readFile(path.join(ro.path, 'f'), 'utf8')).toBe('v1');
      await pool.destroy(ro.name);
      expect(await pool.list()).not.toContain(ro.name);
    });

    it('destroys a volume holding a nested subvolume, leaving no subvolume', async () => {
      const name = volumeName();
      const { path: p } = await pool.create(name);
      await mkdir(path.join(p, 'a', 'b'), { recursive: true });
      await runTool('btrfs', ['subvolume', 'create', path.join(p, 'a', 'b', 'nested')]);
      await runTool('btrfs', ['subvolume', 'create', path.join(p, 'a', 'b', 'nested', 'deeper')]);
      await pool.destroy(name);
      const listed = (await runTool('btrfs', ['subvolume', 'list', pool.root])).stdout;
      expect(listed).not.toContain(name);
      expect(await pool.list()).not.toContain(name);
    });

    it('clears subvolumes left by an interrupted create when opened again', async () => {
      await runTool('btrfs', ['subvolume', 'create', path.join(pool.root, '.tmp-crashed-abc')]);
      await mkdir(path.join(pool.root, '.tmp-plain-def'));
      const again = await BtrfsPool.open({ dir }); // takes the live mount back
      expect(again.root).toBe(pool.root);
      expect(await loopDevicesOf(image)).toHaveLength(1);
      const listed = (await runTool('btrfs', ['subvolume', 'list', pool.root])).stdout;
      expect(listed).not.toContain('.tmp-');
      // `again` is not closed: it shares the mount with `pool`, which afterAll closes.
    });

    it('reports free space no larger than the disk under the sparse image', async () => {
      const u = await pool.usage();
      const below = await filesystemSpace(dir);
      expect(u.kind).toBe('btrfs');
      expect(u.totalBytes).toBeGreaterThan(3 * GiB);
      expect(u.freeBytes).toBeLessThanOrEqual(below.freeBytes);
    });
  });

  describe('closing and reopening', () => {
    let dir: string;
    let image: string;
    let pool: BtrfsPool | undefined;

    beforeAll(async () => {
      dir = await tempPoolDir('reopen');
      image = path.join(dir, 'pool.img');
    });

    afterAll(async () => {
      await pool?.close().catch(() => undefined);
      if (dir) await forceCleanup(dir, [image]);
    });

    it('close() leaves no mount and no loop device; reopening finds the volumes', async () => {
      const first = await BtrfsPool.open({ dir, imageSizeBytes: GiB });
      pool = first;
      const uuid = await fsUuid(image);
      const name = volumeName();
      const { path: p } = await first.create(name, { quotaBytes: 100 * MiB });
      await writeFile(path.join(p, 'kept.txt'), 'still here');
      await first.close();
      expect(await mountsAt(first.root)).toEqual([]);
      expect(await loopDevicesOf(image)).toEqual([]);
      expect(await codeOf(first.list())).toBe('backend');

      const start = process.hrtime.bigint();
      const second = await BtrfsPool.open({ dir, imageSizeBytes: 8 * GiB });
      console.log(`btrfs reopen (attach + mount an existing image): ${ms(start).toFixed(1)} ms`);
      pool = second;
      expect(await fsUuid(image)).toBe(uuid); // not re-formatted
      expect((await stat(image)).size).toBe(GiB); // and not resized
      expect(await second.list()).toEqual([name]);
      expect(await readFile(path.join(p, 'kept.txt'), 'utf8')).toBe('still here');
      expect((await second.info(name))?.quotaBytes).toBe(100 * MiB);
      await second.close();
      pool = undefined;
      expect(await mountsAt(second.root)).toEqual([]);
      expect(await loopDevicesOf(image)).toEqual([]);
    });

    it('refuses to close while a volume is in use, and closes once it is free', async () => {
      pool = await BtrfsPool.open({ dir });
      const { path: p } = await pool.create(volumeName());
      const busy = await open(path.join(p, 'held'), 'w');
      try {
        const err = await pool.close().catch((e: unknown) => e);
        expect(String(err)).toMatch(/busy/);
        expect(await pool.list()).toHaveLength(2); // still open and usable
      } finally {
        await busy.close();
      }
      await pool.close();
      expect(await mountsAt(pool.root)).toEqual([]);
      expect(await loopDevicesOf(image)).toEqual([]);
      pool = undefined;
    });

    it('takes back a loop device left attached by a process that died before mounting', async () => {
      const device = (await runTool('losetup', ['--find', '--show', image])).stdout.trim();
      pool = await BtrfsPool.open({ dir });
      expect(await loopDevicesOf(image)).toEqual([device]);
      expect((await mountsAt(pool.root))[0]?.source).toBe(device);
      await pool.close();
      pool = undefined;
      expect(await loopDevicesOf(image)).toEqual([]);
    });

    it('refuses to format an image that holds another filesystem', async () => {
      const other = await tempPoolDir('foreign');
      try {
        const img = path.join(other, 'pool.img');
        await writeFile(img, '');
        await runTool('truncate', ['-s', '64M', img]);
        await runTool('mkfs.ext4', ['-q', '-F', img]).catch(() => undefined);
        const err = await BtrfsPool.open({ dir: other }).catch((e: Error) => e);
        expect(String(err)).toMatch(/ext4|btrfs/);
        expect(await loopDevicesOf(img)).toEqual([]);
      } finally {
        await forceCleanup(other, [path.join(other, 'pool.img')]);
      }
    });
  });
});
