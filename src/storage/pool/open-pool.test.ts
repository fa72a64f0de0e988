import { readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { btrfsSkipReason, forceCleanup, tempPoolDir } from './btrfs-env.test-helper.js';
import { loopDevicesOf } from './loop.js';
import { btrfsUnavailableReason, openStoragePool, type PoolLog } from './open-pool.js';
import type { StoragePool } from './pool.js';

const skip = btrfsSkipReason();

interface Logged {
  level: 'info' | 'warn';
  obj: unknown;
  msg: string;
}

/** A stand-in for the pino logger that keeps what it was told. */
function recorder(): { lines: Logged[]; log: PoolLog } {
  const lines: Logged[] = [];
  const at = (level: Logged['level']) => (obj: unknown, msg: string) =>
    void lines.push({ level, obj, msg });
  return { lines, log: { info: at('info'), warn: at('warn') } };
}

// A pino logger is what the platform will pass.
const _pinoFits: PoolLog = pino({ enabled: false });

describe('openStoragePool', () => {
  const opened: StoragePool[] = [];
  const dirs: string[] = [];

  async function freshDir(): Promise<string> {
    const dir = await tempPoolDir('open');
    dirs.push(dir);
    return dir;
  }

  afterEach(async () => {
    for (const pool of opened.splice(0)) await pool.close().catch(() => undefined);
    for (const dir of dirs.splice(0)) await forceCleanup(dir, [path.join(dir, 'pool.img')]);
  });

  it('uses the directory pool when configured, says why, and keeps it', async () => {
    const dir = await freshDir();
    const r = recorder();
    const { pool, reason } = await openStoragePool({ dir, prefer: 'directory', log: r.log });
    opened.push(pool);
    expect(pool.kind).toBe('directory');
    expect(reason).toMatch(/^directory pool .*configured/);
    expect(r.lines).toEqual([
      {
        level: 'warn',
        obj: expect.objectContaining({ kind: 'directory', reason }),
        msg: 'storage pool opened',
      },
    ]);
    expect(await readFile(path.join(dir, 'pool.kind'), 'utf8')).toBe('directory\n');
    await pool.create('db-1');

    // A later start that could use btrfs keeps the directory pool and its volumes.
    const again = await openStoragePool({ dir });
    opened.push(again.pool);
    expect(again.pool.kind).toBe('directory');
    expect(again.reason).toMatch(/keeps its kind/);
    expect(await again.pool.list()).toEqual(['db-1']);
  });

  it.skipIf(skip !== undefined)('finds nothing that stops btrfs on this host', async () => {
    expect(await btrfsUnavailableReason(await freshDir())).toBeUndefined();
  });

  it.skipIf(skip !== undefined)(
    'chooses btrfs on an image where it can, and keeps it whatever is preferred later',
    async () => {
      const dir = await freshDir();
      const first = await openStoragePool({ dir, imageSizeBytes: 1024 ** 3 });
      opened.push(first.pool);
      expect(first.pool.kind).toBe('btrfs');
      expect(first.reason).toBe(`btrfs on the loop-mounted image ${path.join(dir, 'pool.img')}`);
      expect(await readFile(path.join(dir, 'pool.kind'), 'utf8')).toBe('btrfs\n');
      await first.pool.create('db-1', { quotaBytes: 1024 ** 3 });
      expect((await first.pool.usage()).kind).toBe('btrfs');
      await first.pool.close();

      const again = await openStoragePool({ dir, prefer: 'directory' });
      opened.push(again.pool);
      expect(again.pool.kind).toBe('btrfs');
      expect(await again.pool.list()).toEqual(['db-1']);
      await again.pool.close();
      expect(await loopDevicesOf(path.join(dir, 'pool.img'))).toEqual([]);
    },
    60_000,
  );

  it('refuses a pool.kind it does not know', async () => {
    const dir = await freshDir();
    await openStoragePool({ dir, prefer: 'directory' }).then((r) => opened.push(r.pool));
    await writeFile(path.join(dir, 'pool.kind'), 'zfs\n');
    await expect(openStoragePool({ dir })).rejects.toThrow(/pool.kind/);
    await rm(path.join(dir, 'pool.kind'));
  });
});
