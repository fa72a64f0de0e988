import { describe, expect, it } from 'vitest';
import { INIT_PATH, ociConfig } from './oci-config.js';
import { REFUSED_SYSCALLS, ALLOWED_SYSCALLS } from './seccomp.js';
import { ROOT_CAPS, type SandboxSpec } from './spec.js';

const spec: SandboxSpec = {
  id: 'm1',
  rootfs: '/var/lib/pier/m1.root',
  netns: 'pier-m1',
  userns: '/run/pier/userns/pier-m1',
  hostname: 'web-1',
  argv: ['httpd', '-f'],
  env: { PATH: '/bin', SECRET: 'hunter2' },
  cwd: '/srv',
  uid: 0,
  gid: 0,
  mounts: [
    { source: '/vol/data', target: '/data', readOnly: false },
    { source: '/etc/pier/ca.crt', target: '/etc/pier/ca.crt', readOnly: true },
  ],
  cgroup: 'm1',
  stateDir: '/var/lib/pier/m1/state',
  logMaxBytes: 1 << 20,
};
const opts = { cgroupsPath: '/pier/m1', initBinary: '/usr/bin/tini-static', arch: 'x64' };

describe('OCI configuration of a sandbox', () => {
  it('runs the process under the init, with its environment, directory and user', () => {
    const c = ociConfig(spec, opts);
    expect(c.process.args).toEqual([INIT_PATH, '--', 'httpd', '-f']);
    expect(c.process.env).toEqual(['PATH=/bin', 'SECRET=hunter2']);
    expect(c.process.cwd).toBe('/srv');
    expect(c.process.user).toEqual({ uid: 0, gid: 0, additionalGids: [] });
    const member = ociConfig({ ...spec, uid: 1000, gid: 1000, groups: [50, 27] }, opts);
    expect(member.process.user).toEqual({ uid: 1000, gid: 1000, additionalGids: [50, 27] });
    expect(c.process.noNewPrivileges).toBe(true);
    expect(c.root).toEqual({ path: spec.rootfs, readonly: false });
    const init = c.mounts.find((m) => m.destination === INIT_PATH);
    expect(init).toMatchObject({
      source: '/usr/bin/tini-static',
      options: expect.arrayContaining(['ro']),
    });
  });

  it("maps the machine's ids to the host's 200000 range, in its own user namespace and the netns it owns", () => {
    const c = ociConfig(spec, opts);
    expect(c.linux.uidMappings).toEqual([{ containerID: 0, hostID: 200_000, size: 65_536 }]);
    expect(c.linux.gidMappings).toEqual(c.linux.uidMappings);
    expect(c.linux.namespaces).toEqual([
      { type: 'pid' },
      { type: 'ipc' },
      { type: 'uts' },
      { type: 'mount' },
      { type: 'cgroup' },
      { type: 'user', path: '/run/pier/userns/pier-m1' },
      { type: 'network', path: '/run/netns/pier-m1' },
    ]);
    const { netns: _n, userns: _u, ...alone } = spec;
    expect(ociConfig(alone, opts).linux.namespaces.slice(-2)).toEqual([
      { type: 'user' },
      { type: 'network' },
    ]);
    expect(c.linux.cgroupsPath).toBe('/pier/m1');
  });

  it('under runsc, asks for a new user namespace of the same mapping, and the same netns', () => {
    const c = ociConfig(spec, { ...opts, runtime: 'runsc' });
    expect(c.linux.namespaces).toContainEqual({ type: 'user' });
    expect(c.linux.namespaces).toContainEqual({ type: 'network', path: '/run/netns/pier-m1' });
    expect(c.linux.uidMappings).toEqual([{ containerID: 0, hostID: 200_000, size: 65_536 }]);
    expect(c.linux.seccomp).toEqual(ociConfig(spec, opts).linux.seccomp);
  });

  it('opens low ports and ping to every user of its own network namespace, under runc only', () => {
    expect(ociConfig(spec, opts).linux.sysctl).toEqual({
      'net.ipv4.ip_unprivileged_port_start': '0',
      'net.ipv4.ping_group_range': '0 65535',
    });
    expect(ociConfig(spec, { ...opts, runtime: 'runsc' }).linux.sysctl).toBeUndefined();
  });

  it("keeps Docker's default capabilities for root and none for anyone else", () => {
    expect(ociConfig(spec, opts).process.capabilities).toEqual({
      bounding: [...ROOT_CAPS],
      effective: [...ROOT_CAPS],
      permitted: [...ROOT_CAPS],
    });
    expect(ROOT_CAPS).not.toContain('CAP_SYS_ADMIN');
    expect(ociConfig({ ...spec, uid: 101 }, opts).process.capabilities).toEqual({
      bounding: [...ROOT_CAPS],
      effective: [],
      permitted: [],
    });
  });

  it('masks what exposes the host and makes its knobs read-only', () => {
    const c = ociConfig(spec, opts);
    for (const p of ['/proc/kcore', '/proc/kallsyms', '/proc/keys', '/sys/firmware']) {
      expect(c.linux.maskedPaths).toContain(p);
    }
    for (const p of ['/proc/sys', '/proc/sysrq-trigger', '/proc/irq', '/proc/bus']) {
      expect(c.linux.readonlyPaths).toContain(p);
    }
    expect(c.mounts.find((m) => m.destination === '/sys')?.options).toContain('ro');
    expect(c.linux.resources.devices).toEqual([{ allow: false, access: 'rwm' }]);
  });

  it('binds volumes and files where asked, read-only when asked, after the standard mounts', () => {
    const c = ociConfig(spec, opts);
    const binds = c.mounts.slice(-2);
    expect(binds).toEqual([
      {
        destination: '/data',
        type: 'bind',
        source: '/vol/data',
        options: ['rbind', 'rw', 'nosuid', 'nodev'],
      },
      {
        destination: '/etc/pier/ca.crt',
        type: 'bind',
        source: '/etc/pier/ca.crt',
        options: ['rbind', 'ro', 'nosuid', 'nodev'],
      },
    ]);
  });

  it('filters syscalls by an allowlist that leaves out the dangerous ones', () => {
    const { seccomp } = ociConfig(spec, opts).linux;
    expect(seccomp.defaultAction).toBe('SCMP_ACT_ERRNO');
    expect(seccomp.architectures).toContain('SCMP_ARCH_X86_64');
    for (const name of REFUSED_SYSCALLS) expect(ALLOWED_SYSCALLS).not.toContain(name);
    for (const name of ['read', 'write', 'execve', 'openat', 'socket', 'epoll_wait', 'futex']) {
      expect(ALLOWED_SYSCALLS).toContain(name);
    }
    const clone = seccomp.syscalls.find((r) => r.names.includes('clone'));
    expect(clone?.args).toEqual([
      { index: 0, value: 0x7e020000, valueTwo: 0, op: 'SCMP_CMP_MASKED_EQ' },
    ]);
    expect(seccomp.syscalls.find((r) => r.names.includes('clone3'))).toMatchObject({
      action: 'SCMP_ACT_ERRNO',
      errnoRet: 38,
    });
    expect(() => ociConfig(spec, { ...opts, arch: 'mips' })).toThrow(/no seccomp profile/);
  });
});
