import { describe, expect, it } from 'vitest';
import { bwrapOptions, checkSpec, commandLine, ROOT_CAPS, type SandboxSpec } from './spec.js';

const base: SandboxSpec = {
  id: 'm1',
  rootfs: '/var/lib/pier/m1/rootfs',
  netns: 'pier-m1',
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
const targets = { proc: '/proc', dev: '/dev', tmp: '/tmp', mounts: ['/data'] };

/** The values following each occurrence of `flag`. */
function after(args: string[], flag: string, n = 1): string[][] {
  return args.flatMap((a, i) => (a === flag ? [args.slice(i + 1, i + 1 + n)] : []));
}

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

  it('enters the netns as root, then drops to the uid, and keeps options off the command line', () => {
    expect(commandLine(base)).toEqual([
      'nsenter',
      '--net=/run/netns/pier-m1',
      '--',
      'bwrap',
      '--args',
      '5',
      '--',
      '/bin/sh',
      '-c',
      'exec httpd -f',
    ]);
    const user = commandLine({ ...base, netns: undefined, uid: 1000, gid: 100 });
    expect(user.slice(0, 6)).toEqual([
      'setpriv',
      '--reuid=1000',
      '--regid=100',
      '--clear-groups',
      '--',
      'bwrap',
    ]);
    expect(user.join(' ')).not.toContain('hunter2');
  });

  it('unshares every namespace but the network one it was given, and binds the root first', () => {
    const args = bwrapOptions(base, targets);
    for (const flag of [
      '--unshare-user',
      '--unshare-pid',
      '--unshare-ipc',
      '--unshare-uts',
      '--new-session',
      '--clearenv',
    ]) {
      expect(args).toContain(flag);
    }
    expect(args).not.toContain('--unshare-net');
    expect(args).not.toContain('--die-with-parent'); // it must outlive pier
    expect(bwrapOptions({ ...base, netns: undefined }, targets)).toContain('--unshare-net');
    const bind = args.indexOf('--bind');
    expect(args.slice(bind, bind + 3)).toEqual(['--bind', base.rootfs, '/']);
    expect(args.indexOf('--proc')).toBeGreaterThan(bind);
    expect(after(args, '--hostname')).toEqual([['web-1']]);
    expect(after(args, '--chdir')).toEqual([['/srv']]);
    expect(after(args, '--setenv', 2)).toEqual([
      ['PATH', '/bin'],
      ['SECRET', 'hunter2'],
    ]);
    expect(after(args, '--tmpfs')).toEqual([['/tmp']]);
  });

  it('makes /proc/sys and friends read-only and masks what exposes the host', () => {
    const args = bwrapOptions(base, {
      ...targets,
      procReadOnly: ['sys', 'irq'],
      procMasked: { files: ['kcore'], dirs: ['acpi'] },
      emptyDir: '/run/pier/empty',
    });
    const proc = args.indexOf('--proc');
    expect(args.slice(proc, proc + 14)).toEqual([
      '--proc',
      '/proc',
      '--ro-bind',
      '/proc/sys',
      '/proc/sys',
      '--ro-bind',
      '/proc/irq',
      '/proc/irq',
      '--ro-bind',
      '/dev/null',
      '/proc/kcore',
      '--ro-bind',
      '/run/pier/empty',
      '/proc/acpi',
    ]);
    expect(() =>
      bwrapOptions(base, { ...targets, procMasked: { files: [], dirs: ['acpi'] } }),
    ).toThrow(/empty directory/);
  });

  it('binds volumes at their resolved targets, read-only when asked, after /tmp', () => {
    const spec = {
      ...base,
      mounts: [
        { source: '/vol/a', target: '/a', readOnly: false },
        { source: '/vol/b', target: '/link/b', readOnly: true },
      ],
    };
    const args = bwrapOptions(spec, { ...targets, mounts: ['/a', '/real/b'] });
    expect(after(args, '--bind', 2)).toEqual([
      [base.rootfs, '/'],
      ['/vol/a', '/a'],
    ]);
    expect(after(args, '--ro-bind', 2)).toEqual([['/vol/b', '/real/b']]);
    expect(args.indexOf('--ro-bind')).toBeGreaterThan(args.indexOf('--tmpfs'));
  });

  it("keeps Docker's default capabilities for root and none for anyone else", () => {
    const root = bwrapOptions(base, targets);
    expect(after(root, '--cap-drop')).toEqual([['ALL']]);
    expect(after(root, '--cap-add').flat()).toEqual([...ROOT_CAPS]);
    expect(root.indexOf('--cap-drop')).toBeLessThan(root.indexOf('--cap-add'));
    const user = bwrapOptions({ ...base, uid: 1000, gid: 1000 }, targets);
    expect(after(user, '--cap-drop')).toEqual([['ALL']]);
    expect(user).not.toContain('--cap-add');
    expect(ROOT_CAPS).not.toContain('CAP_SYS_ADMIN');
  });
});
