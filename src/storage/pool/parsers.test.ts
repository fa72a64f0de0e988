import { describe, expect, it } from 'vitest';
import { parseQgroupShow, parseSubvolumeIds } from './btrfs-cli.js';
import { parseMountInfo } from './mounts.js';
import { NameLocks } from './name-lock.js';
import { checkName, PoolError } from './pool.js';

describe('parseMountInfo', () => {
  it('reads mount point, type and source, past optional fields and escapes', () => {
    const text = [
      '22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw',
      '43 27 0:39 / /tmp/a\\040b/mnt rw,noatime shared:2 master:1 - btrfs /dev/loop3 rw,space_cache=v2',
      '44 27 0:40 / /x rw - tmpfs tmpfs rw',
      '',
    ].join('\n');
    expect(parseMountInfo(text)).toEqual([
      { mountPoint: '/', fsType: 'ext4', source: '/dev/vda' },
      { mountPoint: '/tmp/a b/mnt', fsType: 'btrfs', source: '/dev/loop3' },
      { mountPoint: '/x', fsType: 'tmpfs', source: 'tmpfs' },
    ]);
  });
});

describe('btrfs output', () => {
  it('parses qgroup rows with and without a limit or path column', () => {
    const text = [
      'Qgroupid    Referenced    Exclusive  Max referenced   Path ',
      '--------    ----------    ---------  --------------   ---- ',
      '0/5              16384        16384            none   <toplevel>',
      '0/256       1073758208        16384      2147483648   a',
      '0/257       1073758208        16384            none   <stale>',
      '1/100            0            0            none',
    ].join('\n');
    expect(parseQgroupShow(text)).toEqual([
      { subvolumeId: 5, referenced: 16384, maxReferenced: null },
      { subvolumeId: 256, referenced: 1073758208, maxReferenced: 2147483648 },
      { subvolumeId: 257, referenced: 1073758208, maxReferenced: null },
    ]);
  });

  it('parses subvolume ids', () => {
    const text = 'ID 256 gen 14 top level 5 path a\nID 258 gen 15 top level 256 path a/x/n b\n';
    expect(parseSubvolumeIds(text)).toEqual([256, 258]);
  });
});

describe('checkName', () => {
  it('accepts volume names and refuses anything that could leave the root', () => {
    for (const ok of ['a', '0', 'db-1', 'br-abc-123', 'x'.repeat(101)]) checkName(ok);
    for (const bad of ['', '.', '..', '../x', 'a/b', 'A', '-a', '.tmp-a', 'a b', 'x'.repeat(102)]) {
      expect(() => checkName(bad), bad).toThrow(PoolError);
    }
  });
});

describe('NameLocks', () => {
  it('runs work on one name one at a time, and on different names side by side', async () => {
    const locks = new NameLocks();
    const order: string[] = [];
    const step = (label: string, ms: number) =>
      new Promise<void>((resolve) =>
        setTimeout(() => {
          order.push(label);
          resolve();
        }, ms),
      );
    await Promise.all([
      locks.with(['a'], () => step('a1', 30)),
      locks.with(['a'], () => step('a2', 1)),
      locks.with(['b'], () => step('b1', 10)),
      locks.with(['b', 'a'], () => step('ab', 1)),
    ]);
    expect(order).toEqual(['b1', 'a1', 'a2', 'ab']);
  });

  it('releases the lock when the work fails', async () => {
    const locks = new NameLocks();
    await expect(locks.with(['a'], () => Promise.reject(new Error('boom')))).rejects.toThrow(
      'boom',
    );
    expect(await locks.with(['a'], async () => 'next')).toBe('next');
  });
});
