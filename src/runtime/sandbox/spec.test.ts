import { describe, expect, it } from 'vitest';
import { checkSpec, type SandboxSpec } from './spec.js';

const base: SandboxSpec = {
  id: 'm1',
  rootfs: '/var/lib/pier/m1/rootfs',
  netns: 'pier-m1',
  userns: '/run/pier/userns/pier-m1',
  hostname: 'web-1',
  argv: ['/bin/sh', '-c', 'exec httpd -f'],
  env: { PATH: '/bin', SECRET: 'hunter2' },
  cwd: '/srv',
  uid: 0,
  gid: 0,
  mounts: [{ source: '/vol/data', target: '/data', readOnly: false }],
  cgroup: 'm1',
  stateDir: '/var/lib/pier/m1/state',
  logMaxBytes: 1 << 20,
};

describe('sandbox spec', () => {
  it('accepts a sound spec and lists every problem of a bad one', () => {
    expect(() => checkSpec(base)).not.toThrow();
    const bad = {
      ...base,
      rootfs: 'rel',
      cwd: 'x',
      hostname: 'no_underscores',
      argv: [],
      env: { 'A=B': '1', OK: 'a\0b' },
      uid: -1,
      mounts: [{ source: 'rel', target: '/x', readOnly: true }],
      logMaxBytes: 100,
      netns: '../x',
    };
    const message = (() => {
      try {
        checkSpec(bad);
        return '';
      } catch (err) {
        return (err as Error).message;
      }
    })();
    for (const part of [
      'rootfs',
      'cwd',
      'hostname',
      'argv is empty',
      'A=B',
      'env OK',
      'uid',
      'mount source',
      'logMaxBytes',
      'netns',
    ]) {
      expect(message).toContain(part);
    }
    expect(() => checkSpec({ ...base, id: '../etc' })).toThrow(/invalid sandbox id/);
  });

  it("refuses a netns without the user namespace that owns it, and ids outside a machine's range", () => {
    const { userns: _, ...noUserns } = base;
    expect(() => checkSpec(noUserns)).toThrow(/needs the userns/);
    expect(() => checkSpec({ ...base, uid: 65_536 })).toThrow(/invalid uid 65536/);
    expect(() => checkSpec({ ...base, gid: 65_535 })).not.toThrow();
  });
});
