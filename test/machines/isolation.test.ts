/**
 * Escapes tried from inside a real machine, the way a tenant holding a full-access key
 * would: a shell session (spec 4.9 exec) as machine root, probing the host with reads,
 * access checks and connects only, so a missing wall would show without harming the
 * host (the one write, filling its own disk, stays in its own layer). Each probe passes
 * only when the attempt is refused.
 *
 * The other walls have their own files: the files API on FIFOs and pseudo-files, and a
 * revoked key's shell, in guest.test.ts; an app-limited agent attaching, in the agents'
 * tests; the sandbox itself (mounts, hostname, processes), in
 * src/runtime/sandbox/isolation.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { busyboxLayer } from '../../src/runtime/images/build.test-helper.js';
import { canRunMachines, startMachineBed, type MachineBed } from './bed.js';
import { openSession } from './session.js';

let bed: MachineBed;
let id: string;

beforeAll(async () => {
  if (!canRunMachines) return;
  bed = await startMachineBed('is', 190);
  const image = await bed.image('root:1', {
    layers: [busyboxLayer()],
    config: { Cmd: ['/bin/sh', '-c', 'echo up; exec sleep 3600'] },
  });
  expect((await bed.req('POST', '/v1/apps', { name: 'tenant' })).status).toBe(201);
  // The smallest disk, so that filling it is quick.
  const made = await bed.req('POST', '/v1/apps/tenant/machines', {
    image,
    readiness: 'boot',
    diskMb: 512,
  });
  expect(made.status, JSON.stringify(made.body)).toBe(201);
  id = made.body.id;
}, 120_000);

afterAll(async () => {
  await bed?.close();
});

/** Runs `script` in a session on pipes; its stdout lines, trimmed, once it ends. */
async function inSession(script: string): Promise<string[]> {
  const s = await openSession(bed, id, `?cmd=/bin/sh&cmd=-c&cmd=${encodeURIComponent(script)}`);
  s.ws.send(JSON.stringify({ type: 'eof' }));
  await s.exit;
  return s.out[1]
    .trim()
    .split('\n')
    .map((l) => l.trim().replace(/\s+/g, ' '));
}

describe.skipIf(!canRunMachines)('a session as machine root, trying to get out', () => {
  it('holds no more than the machine’s own process: same capabilities, seccomp, no_new_privs', async () => {
    const out = await inSession(
      [
        'id -u',
        // Pid 1 is the init, its child the machine's process; then the session itself.
        "main=$(cat /proc/1/task/1/children | cut -d' ' -f1)",
        "grep -E '^(CapEff|CapBnd|Seccomp|NoNewPrivs):' /proc/$main/status",
        "grep -E '^(CapEff|CapBnd|Seccomp|NoNewPrivs):' /proc/self/status",
      ].join('; '),
    );
    expect(out[0]).toBe('0');
    const main = out.slice(1, 5);
    const session = out.slice(5, 9);
    expect(session).toEqual(main);
    expect(session).toContain('Seccomp: 2');
    expect(session).toContain('NoNewPrivs: 1');
    // Docker's default set (0x00000000a80425fb): no CAP_SYS_ADMIN (bit 21), nothing beyond.
    expect(session).toContain('CapEff: 00000000a80425fb');
  });

  it('is host uid 200000, which the host’s sysctls and keys refuse whatever it unmounts', async () => {
    const out = await inSession(
      [
        'cat /proc/self/uid_map',
        'umount /proc/sys 2>/dev/null || echo umount-refused',
        'umount -l /proc/sys 2>/dev/null || echo lazy-umount-refused',
        // Opened for appending and never written: refused by the read-only mount and,
        // beneath it, by the file's owner (host root, whom the machine is not).
        "sh -c 'exec 3>>/proc/sys/kernel/core_pattern' 2>/dev/null && echo open || echo core-pattern-refused",
        "sh -c 'exec 3>>/proc/sys/kernel/modprobe' 2>/dev/null && echo open || echo modprobe-refused",
        'cat /proc/kallsyms | wc -c',
        'cat /proc/keys 2>/dev/null | wc -c',
      ].join('; '),
    );
    expect(out).toEqual([
      '0 200000 65536',
      'umount-refused',
      'lazy-umount-refused',
      'core-pattern-refused',
      'modprobe-refused',
      '0',
      '0',
    ]);
  });

  it('cannot make namespaces, mount, or reach the host’s devices', async () => {
    const out = await inSession(
      [
        'unshare -U -r true 2>/dev/null || echo userns-refused',
        'unshare -m true 2>/dev/null || echo mountns-refused',
        'mkdir -p /mnt/x; mount -t tmpfs t /mnt/x 2>/dev/null || echo mount-refused',
        'mknod /tmp/sda b 8 0 2>/dev/null && (head -c1 /tmp/sda >/dev/null 2>&1 && echo disk-read || echo disk-refused) || echo mknod-refused',
        'ls /dev | sort | tr "\\n" " "',
      ].join('; '),
    );
    expect(out.slice(0, 4)).toEqual([
      'userns-refused',
      'mountns-refused',
      'mount-refused',
      // The node may be made (CAP_MKNOD, as in Docker); the devices cgroup refuses opening it.
      expect.stringMatching(/^(mknod-refused|disk-refused)$/),
    ]);
    for (const dev of ['sda', 'vda', 'nvme0n1', 'mem', 'kmsg']) expect(out[4]).not.toContain(dev);
  });

  it('cannot write past its diskMb: the pool’s quota refuses the write inside the machine', async () => {
    // Written in the machine's own layer, then removed: nothing of the host is touched.
    const out = await inSession(
      [
        'dd if=/dev/zero of=/fill bs=1M count=640 2>&1 | grep -o "Disk quota exceeded\\|No space left on device" | head -1',
        'du -m /fill | cut -f1',
        'rm -f /fill',
      ].join('; '),
    );
    expect(out[0]).toMatch(/Disk quota exceeded|No space left on device/);
    expect(Number(out[1])).toBeLessThanOrEqual(512);
  }, 60_000);
});
