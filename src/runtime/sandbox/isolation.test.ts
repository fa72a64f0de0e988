/**
 * Isolation, proven from inside: two machines on a bridge of this test's own
 * (`pier-s<pid>`, 10.215.0.0/16); `a` serves HTTP, `b` looks around with busybox. Skipped
 * where sandboxes cannot run (not root, no runc…).
 */
import { readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Network } from './network.js';
import { ROOT_CAPS } from './spec.js';
import { sandboxUnavailable, type Bed } from './testbed.test-helper.js';
import { startTwoMachines, type TwoMachines } from './two-machines.test-helper.js';

const unavailable = await sandboxUnavailable();
const exists = (p: string) =>
  stat(p).then(
    () => true,
    () => false,
  );

describe.skipIf(unavailable)(
  `sandbox isolation${unavailable ? ` (skipped: ${unavailable})` : ''}`,
  () => {
    const net = new Network({ bridge: `pier-s${process.pid}`.slice(0, 15), cidr: '10.215.0.0/16' });
    const marker = `pier-host-marker-${process.pid}`;
    const hostMarkers = [path.join(os.tmpdir(), marker), path.join('/root', marker)];
    const escape = `/tmp/pier-escape-${process.pid}`;
    let bed: Bed;
    let hostPort = 0;
    let volume: string;
    let two: TwoMachines;
    const probeB = (script: string, over = {}) => two.probeB(script, over);

    beforeAll(async () => {
      for (const f of hostMarkers) await writeFile(f, 'host only\n');
      // Machine a serves the image's /var/www on port 80, as root, and leaves traces.
      two = await startTwoMachines(net, {
        tag: 'iso',
        limits: { memoryBytes: 64 << 20, pids: 64 },
        serve:
          'echo secret > /srv/a-secret; echo tmp > /tmp/a-tmp; exec httpd -f -p 80 -h /var/www',
      });
      ({ bed, hostPort, volume } = two);
    });

    afterAll(async () => {
      await two?.close();
      for (const f of hostMarkers) await rm(f, { force: true });
      await rm(escape, { recursive: true, force: true });
    });

    it('shows only its own processes; pid 1 is the sandbox init, the parent of its process', async () => {
      const { out, status } = await probeB(
        'echo "me $$ of $PPID"; cat /proc/1/comm; ls /proc | grep "^[0-9]" | sort -n | tr "\\n" " "; echo; ps -o comm',
      );
      expect(status).toMatchObject({ code: 0, signal: null });
      expect(out[0]).toMatch(/^me \d+ of 1$/);
      expect(out[1]).toBe('.pier-init');
      const pids = (out[2] ?? '').trim().split(' ').map(Number);
      expect(pids[0]).toBe(1);
      expect(Math.max(...pids)).toBeLessThan(20); // a handful, all its own
      expect(out.join('\n')).not.toContain('httpd'); // machine a's server is invisible
    });

    it('sees its image, not the host nor the other machine', async () => {
      const script = [
        ...hostMarkers.map((f) => `test -e ${f} && echo "visible ${f}" || echo "absent ${f}"`),
        'cat /etc/image-marker',
        'test -e /srv/a-secret && echo a-secret-visible || echo a-secret-absent',
        'test -e /tmp/a-tmp && echo a-tmp-visible || echo a-tmp-absent',
        'grep :memory: /proc/self/cgroup',
      ].join('; ');
      const { out } = await probeB(script);
      expect(out).toEqual([
        ...hostMarkers.map((f) => `absent ${f}`),
        'from the image',
        'a-secret-absent',
        'a-tmp-absent',
        // The cgroup namespace is rooted at its own group: nothing of the host's layout shows.
        expect.stringMatching(/^\d+:memory:\/$/),
      ]);
      // While machine a did write them, in its own upper layer.
      expect(await readFile(path.join(bed.dir, 'a/volume/upper/srv/a-secret'), 'utf8')).toBe(
        'secret\n',
      );
    });

    it('has its own hostname and only lo and eth0 with its address', async () => {
      const { out } = await probeB(
        "hostname; ip -o -4 addr show | awk '{print $2, $4}'; ip -o link show | awk -F\": \" '{print $2}'",
      );
      expect(out).toEqual([
        'machine-b',
        'lo 127.0.0.1/8',
        'eth0 10.215.0.3/16',
        'lo',
        'eth0@if' + out[4]?.split('@if')[1],
      ]);
      expect(out[4]).toMatch(/^eth0@if\d+$/);
    });

    it('reaches the other machine and the host on the bridge', async () => {
      const { out, err } = await probeB(
        // (This busybox's wget crashes with -T, or with -q and -O -.)
        `wget -q -O /tmp/a http://10.215.0.2/ && cat /tmp/a; wget -q -O /tmp/h http://${net.gateway}:${hostPort}/ && cat /tmp/h`,
      );
      expect(err).toEqual([]);
      expect(out).toEqual(['hello from the image', 'hello from the host']);
    });

    it('writes to its upper layer only; the image stays untouched', async () => {
      const { status } = await probeB('echo by-b > /etc/written-by-b && rm /etc/image-marker');
      expect(status.code).toBe(0);
      expect(await readFile(path.join(bed.dir, 'b/volume/upper/etc/written-by-b'), 'utf8')).toBe(
        'by-b\n',
      );
      expect(await exists(path.join(bed.image, 'etc/written-by-b'))).toBe(false);
      expect(await readFile(path.join(bed.image, 'etc/image-marker'), 'utf8')).toBe(
        'from the image\n',
      );
      const { out } = await bed.probe('a-peek', 'test -e /etc/image-marker && echo kept');
      expect(out).toEqual(['kept']); // another machine on the same image still has it
    });

    it('runs as the given uid and gid, with no capabilities', async () => {
      const { out, err } = await probeB(
        "id; grep CapEff /proc/self/status; touch /etc/nope; echo mine > /home/app/file; ls -n /home/app/file | awk '{print $3, $4}'",
        { uid: 1000, gid: 1000 },
      );
      expect(out[0]).toBe('uid=1000(app) gid=1000(app)'); // no supplementary groups
      expect(out[1]).toBe('CapEff:\t0000000000000000');
      expect(err.join('\n')).toMatch(/touch: \/etc\/nope: Permission denied/);
      expect(out[2]).toBe('1000 1000');
      // On the host, machine uid 1000 is 201000: no host account's.
      const st = await stat(path.join(bed.dir, 'b/volume/upper/home/app/file'));
      expect([st.uid, st.gid]).toEqual([201_000, 201_000]);
    });

    it('lets any of its users bind ports below 1024 and ping, as in Docker', async () => {
      const { out } = await probeB(
        'cat /proc/sys/net/ipv4/ip_unprivileged_port_start /proc/sys/net/ipv4/ping_group_range; httpd -f -p 81 -h /tmp & sleep 0.3; kill $! && echo bound',
        { uid: 1000, gid: 1000 },
      );
      expect(out.map((l) => l.replace(/\s+/g, ' '))).toEqual(['0', '0 65535', 'bound']);
    });

    it("gives root Docker's capabilities, which reach neither the host's network nor its sysctls", async () => {
      // Only sysctls of the machine's own namespaces are tried: harmless should a write pass.
      const script = [
        'grep CapEff /proc/self/status',
        'ip link set eth0 down',
        'mkdir -p /mnt && mount -t tmpfs x /mnt',
        'echo other > /proc/sys/kernel/hostname',
        'echo 1 > /proc/sys/net/ipv4/ip_forward',
        'hostname',
        'cat /proc/keys | wc -c',
      ].join('; ');
      const { out, err } = await probeB(script);
      const capEff = BigInt(`0x${out[0]?.split('\t')[1]}`);
      expect(capEff.toString(2).replace(/0/g, '')).toHaveLength(ROOT_CAPS.length);
      const errors = err.join('\n');
      expect(errors).toMatch(/ip: SIOCSIFFLAGS: Operation not permitted/);
      expect(errors).toMatch(/mount: permission denied/);
      expect(errors).toMatch(/can't create \/proc\/sys\/kernel\/hostname: Read-only file system/);
      expect(errors).toMatch(
        /can't create \/proc\/sys\/net\/ipv4\/ip_forward: Read-only file system/,
      );
      expect(out.slice(1)).toEqual(['machine-b', '0']); // /proc/keys masked by /dev/null
    });

    it('is host uid 200000 to the kernel, so what its mounts leave open still refuses it', async () => {
      // Reads and access checks only: nothing here changes the host should a wall be missing.
      const script = [
        'cat /proc/self/uid_map /proc/self/gid_map',
        'umount /proc/sys || echo umount-refused',
        'mount -t proc proc /mnt 2>/dev/null || echo mount-refused',
        // Opened for appending, never written (busybox's `test -w` trusts uid 0 blindly).
        "sh -c 'exec 3>>/proc/sys/kernel/core_pattern' 2>/dev/null && echo core-pattern-open || echo core-pattern-refused",
        "sh -c 'exec 3>>/proc/sysrq-trigger' 2>/dev/null && echo sysrq-open || echo sysrq-refused",
        'cat /proc/kallsyms | wc -c',
        'cat /proc/kcore | wc -c',
      ].join('; ');
      const { out } = await probeB(script);
      expect(out.map((l) => l.trim().replace(/\s+/g, ' '))).toEqual([
        '0 200000 65536',
        '0 200000 65536',
        'umount-refused',
        'mount-refused',
        'core-pattern-refused',
        'sysrq-refused',
        '0',
        '0',
      ]);
    });

    it('runs under the seccomp allowlist with no_new_privs, for good', async () => {
      const script = [
        "grep -E '^(Seccomp|NoNewPrivs):' /proc/self/status | tr '\\t' ' '",
        // A new user namespace would give back every capability inside it: refused.
        'unshare -U true 2>/dev/null || echo unshare-refused',
        'unshare -n true 2>/dev/null || echo unshare-net-refused',
        // The keyring is not namespaced: its calls are refused outright.
        'cat /proc/keys 2>/dev/null | wc -c',
      ].join('; ');
      const { out } = await probeB(script);
      expect(out.map((l) => l.trim())).toEqual([
        'NoNewPrivs: 1',
        'Seccomp: 2',
        'unshare-refused',
        'unshare-net-refused',
        '0',
      ]);
    });

    it('binds volumes, read-only when asked, and never outside its root', async () => {
      // An image link aimed at where a runtime may see the host root while it sets mounts up.
      const linkDir = path.join(bed.dir, 'b/rootfs/srv');
      await symlink(`/oldroot${escape}`, path.join(linkDir, 'escape')).catch(() => {});
      const { out, err } = await probeB(
        'echo w > /data/w && echo wrote; echo x > /config/x || echo ro; cat /config/config; ls /srv/escape/vol',
        {
          mounts: [
            { source: path.join(volume, 'rw'), target: '/data', readOnly: false },
            { source: path.join(volume, 'ro'), target: '/config', readOnly: true },
            { source: path.join(volume, 'ro'), target: '/srv/escape/vol', readOnly: true },
          ],
        },
      );
      expect(out).toEqual(['wrote', 'ro', 'setting=1', 'config']);
      expect(err.join('\n')).toMatch(/Read-only file system/);
      expect(await readFile(path.join(volume, 'rw/w'), 'utf8')).toBe('w\n');
      expect(await exists(path.join(volume, 'ro/x'))).toBe(false);
      expect(await exists(escape)).toBe(false); // nothing made on the host
    });
  },
);
