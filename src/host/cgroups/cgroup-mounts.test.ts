import { describe, expect, it } from 'vitest';
import { dirOf, parseMountinfo, parseProcCgroup } from './cgroup-mounts.js';

const HYBRID = `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime shared:9 - cgroup cgroup rw,freezer
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`;

const UNIFIED = `24 18 0:22 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:7 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
`;

describe('parseMountinfo', () => {
  it('maps v1 controllers (co-mounted ones too) and the v2 mount of a hybrid host', () => {
    const m = parseMountinfo(HYBRID);
    expect(m.v1.get('freezer')).toEqual({ mountPoint: '/sys/fs/cgroup/freezer', root: '/' });
    expect(m.v1.get('cpu')?.mountPoint).toBe('/sys/fs/cgroup/cpu,cpuacct');
    expect(m.v1.get('memory')?.mountPoint).toBe('/sys/fs/cgroup/memory');
    expect(m.v1.get('pids')?.mountPoint).toBe('/sys/fs/cgroup/pids');
    expect(m.v2).toEqual({ mountPoint: '/sys/fs/cgroup/unified', root: '/' });
  });

  it('finds a pure v2 host and unescapes paths', () => {
    expect(parseMountinfo(UNIFIED)).toEqual({
      v1: new Map(),
      v2: { mountPoint: '/sys/fs/cgroup', root: '/' },
    });
    const escaped = parseMountinfo('1 0 0:1 /a\\040b /mnt/c\\040g rw - cgroup2 none rw\n');
    expect(escaped.v2).toEqual({ mountPoint: '/mnt/c g', root: '/a b' });
  });
});

describe('parseProcCgroup', () => {
  it('reads v1 controller paths and the v2 path', () => {
    const p = parseProcCgroup(
      '9:name=systemd:/\n6:freezer:/\n4:memory:/process_api/e3\n2:cpu,cpuacct:/x\n8:pids:/\n0::/user.slice\n',
    );
    expect(p.v1.get('freezer')).toBe('/');
    expect(p.v1.get('memory')).toBe('/process_api/e3');
    expect(p.v1.get('cpu')).toBe('/x');
    expect(p.v1.get('pids')).toBe('/');
    expect(p.v2).toBe('/user.slice');
  });
});

describe('dirOf', () => {
  it('joins a cgroup path to its mount, inside a mounted sub-tree only', () => {
    const m = { mountPoint: '/sys/fs/cgroup/memory', root: '/' };
    expect(dirOf(m, '/')).toBe('/sys/fs/cgroup/memory');
    expect(dirOf(m, '/process_api/e3')).toBe('/sys/fs/cgroup/memory/process_api/e3');
    const sub = { mountPoint: '/sys/fs/cgroup', root: '/docker/abc' };
    expect(dirOf(sub, '/docker/abc')).toBe('/sys/fs/cgroup');
    expect(dirOf(sub, '/docker/abc/x')).toBe('/sys/fs/cgroup/x');
    expect(dirOf(sub, '/docker/abcd')).toBeUndefined();
    expect(dirOf(sub, '/elsewhere')).toBeUndefined();
  });
});
