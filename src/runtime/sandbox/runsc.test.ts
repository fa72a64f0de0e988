/**
 * Machines under gVisor (runsc, PIER_MACHINE_RUNTIME=runsc): a lifecycle smoke test
 * (start, HTTP from the host, a session with `runsc exec`, stop, nothing left) and the
 * probes of isolation.test.ts from inside, on one bed: machine `a` serves HTTP, `b`
 * looks around. Skipped where sandboxes cannot run or runsc is not installed.
 */
import { execFile, execFileSync } from 'node:child_process';
import { readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MachineRecord } from '../local/records.js';
import { guestOf } from '../local/guest.js';
import { Network } from './network.js';
import { runArgv } from './runtimes.js';
import { ROOT_CAPS } from './spec.js';
import { sandboxUnavailable, type Bed } from './testbed.test-helper.js';
import { startTwoMachines, type TwoMachines } from './two-machines.test-helper.js';

async function runscUnavailable(): Promise<string | undefined> {
  const base = await sandboxUnavailable();
  if (base) return base;
  try {
    execFileSync('runsc', ['--version'], { stdio: 'ignore' });
    return undefined;
  } catch {
    return 'runsc (gVisor) is not installed';
  }
}

const unavailable = await runscUnavailable();
const exists = (p: string) =>
  stat(p).then(
    () => true,
    () => false,
  );

/** Runs `argv` to its end: exit code and output. */
function exec(argv: string[]): Promise<{ code: number; out: string; err: string }> {
  const [file, ...args] = argv as [string, ...string[]];
  return new Promise((resolve) => {
    execFile(file, args, { timeout: 30_000 }, (err, out, errOut) =>
      resolve({ code: err ? Number(err.code ?? 1) : 0, out, err: errOut }),
    );
  });
}

/** GET http://host:port/ from the host: the body. */
function get(host: string, port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    http
      .get({ host, port, path: '/', timeout: 10_000 }, (res) => {
        let body = '';
        res.on('data', (d: Buffer) => (body += d.toString()));
        res.on('end', () => resolve(body));
      })
      .on('error', reject);
  });
}

describe.skipIf(unavailable)(
  `machines under gVisor (runsc)${unavailable ? ` (skipped: ${unavailable})` : ''}`,
  () => {
    const net = new Network({ bridge: `pier-g${process.pid}`.slice(0, 15), cidr: '10.217.0.0/16' });
    const marker = `pier-host-marker-${process.pid}`;
    const hostMarker = path.join(os.tmpdir(), marker);
    let bed: Bed;
    let hostPort = 0;
    let volume: string;
    let two: TwoMachines;
    const probeB = (script: string, over = {}) => two.probeB(script, over);

    beforeAll(async () => {
      await writeFile(hostMarker, 'host only\n');
      two = await startTwoMachines(net, {
        tag: 'gv',
        runtime: 'runsc',
        limits: { memoryBytes: 256 << 20, pids: 128 },
        serve: 'echo secret > /srv/a-secret; exec httpd -f -p 80 -h /var/www',
      });
      ({ bed, hostPort, volume } = two);
    }, 120_000);

    afterAll(async () => {
      await two?.close();
      await rm(hostMarker, { force: true });
    }, 60_000);

    it('runs the machine on the Sentry: a host process as nobody, in its cgroup, rooted in nothing', async () => {
      const pid = await bed.sandboxes.find('a');
      expect(pid).toBeGreaterThan(0);
      const record = await bed.sandboxes.record('a');
      expect(record?.runtimeName).toBe('runsc');
      expect(await bed.cgroups.pids('a')).toContain(pid);
      const status = await readFile(`/proc/${pid}/status`, 'utf8');
      expect(status).toMatch(/^Uid:\t65534\t65534\t65534\t65534$/m);
      // The Sentry's root is an empty directory: the machine's files are not behind it.
      const seen = await readdir(`/proc/${pid}/root`);
      expect(seen).not.toContain('bin');
      expect(seen).not.toContain('srv');
    });

    it('answers HTTP from the host on its address, and takes a session by runsc exec', async () => {
      // The machine runs once its init does; its server listens a moment later.
      let body = '';
      for (let i = 0; i < 100 && !body; i++) {
        body = await get('10.217.0.2', 80).catch(
          () => new Promise<string>((r) => setTimeout(() => r(''), 100)),
        );
      }
      expect(body).toBe('hello from the image\n');
      const command = bed.sandboxes.commandFor(await bed.sandboxes.record('a'));
      expect(command[0]).toBe('runsc');
      const session = await exec([
        ...command,
        'exec',
        'a',
        '/bin/sh',
        '-c',
        'cat /srv/a-secret; id; echo $$',
      ]);
      expect(session.code).toBe(0);
      expect(session.out.split('\n').slice(0, 2)).toEqual(['secret', 'uid=0(root) gid=0(root)']);
      const grep = await exec([
        ...command,
        'exec',
        'a',
        '/bin/sh',
        '-c',
        `test -e ${hostMarker} && echo visible || echo absent`,
      ]);
      expect(grep.out.trim()).toBe('absent');
    });

    it('shows only its own processes; pid 1 is the sandbox init', async () => {
      const { out, status } = await probeB(
        'echo "me $$ of $PPID"; cat /proc/1/comm; ls /proc | grep "^[0-9]" | sort -n | tr "\\n" " "; echo; ps -o comm',
      );
      expect(status).toMatchObject({ code: 0, signal: null });
      expect(out[0]).toMatch(/^me \d+ of 1$/);
      expect(out[1]).toBe('.pier-init');
      const pids = (out[2] ?? '').trim().split(' ').map(Number);
      expect(pids[0]).toBe(1);
      expect(Math.max(...pids)).toBeLessThan(20);
      expect(out.join('\n')).not.toContain('httpd');
    });

    it('sees its image, not the host nor the other machine, and writes to its upper layer', async () => {
      const { out, status } = await probeB(
        [
          `test -e ${hostMarker} && echo visible || echo absent`,
          'cat /etc/image-marker',
          'test -e /srv/a-secret && echo a-secret-visible || echo a-secret-absent',
          'echo by-b > /etc/written-by-b',
        ].join('; '),
      );
      expect(status.code).toBe(0);
      expect(out).toEqual(['absent', 'from the image', 'a-secret-absent']);
      const written = path.join(bed.dir, 'b/volume/upper/etc/written-by-b');
      expect(await readFile(written, 'utf8')).toBe('by-b\n');
      // Owned by machine root as the host sees it (the gofer's user namespace).
      expect((await stat(written)).uid).toBe(200_000);
      expect(await exists(path.join(bed.image, 'etc/written-by-b'))).toBe(false);
    });

    it('has its own hostname and address, and reaches the other machine and the host', async () => {
      // Machine b has run several probes in its netns by now: runsc took its address
      // each time and its keeper gave it back (netns-addresses.ts).
      const fetch = (url: string, file: string) => `wget -q -O ${file} ${url} && cat ${file}`;
      const { out } = await probeB(
        [
          'hostname',
          "ip -o -4 addr show | awk '{print $2, $4}' | sort",
          fetch('http://10.217.0.2/', '/tmp/a'),
          fetch(`http://${net.gateway}:${hostPort}/`, '/tmp/h'),
        ].join('; '),
      );
      expect(out).toEqual([
        'machine-b',
        'eth0 10.217.0.3/16',
        'lo 127.0.0.1/8',
        'hello from the image',
        'hello from the host',
      ]);
    });

    it("runs as the given uid with no capabilities; root has Docker's, which reach nothing of the host", async () => {
      const user = await probeB(
        'id; grep CapEff /proc/self/status; touch /etc/nope; echo mine > /home/app/file',
        { uid: 1000, gid: 1000 },
      );
      expect(user.out[0]).toBe('uid=1000(app) gid=1000(app)');
      expect(user.out[1]).toBe('CapEff:\t0000000000000000');
      expect(user.err.join('\n')).toMatch(/touch: \/etc\/nope: Permission denied/);
      const st = await stat(path.join(bed.dir, 'b/volume/upper/home/app/file'));
      expect([st.uid, st.gid]).toEqual([201_000, 201_000]);

      const root = await probeB(
        [
          'grep CapEff /proc/self/status',
          'ip link set eth0 down',
          'mkdir -p /mnt && mount -t tmpfs x /mnt',
          'echo other > /proc/sys/kernel/hostname',
          'hostname',
          'for f in keys kallsyms kcore sysrq-trigger; do test -e /proc/$f && echo "has $f"; done',
          'echo done',
        ].join('; '),
      );
      const capEff = BigInt(`0x${root.out[0]?.split('\t')[1]}`);
      // Docker's set but CAP_NET_RAW (bit 13), which gVisor drops unless told (--net-raw).
      expect(ROOT_CAPS).toContain('CAP_NET_RAW');
      expect(capEff.toString(2).replace(/0/g, '')).toHaveLength(ROOT_CAPS.length - 1);
      expect(capEff & (1n << 13n)).toBe(0n);
      const errors = root.err.join('\n');
      expect(errors).toMatch(/ip: SIOCSIFFLAGS: Inappropriate ioctl for device/); // gVisor's refusal
      expect(errors).toMatch(/mount: permission denied/);
      expect(errors).toMatch(/write error: Input\/output error/);
      // Hostname unchanged; gVisor's /proc has no keys, symbols, kcore nor sysrq at all.
      expect(root.out.slice(1)).toEqual(['machine-b', 'done']);
    });

    it('runs under the seccomp allowlist, enforced by gVisor itself', async () => {
      // (gVisor's /proc/<pid>/status has no NoNewPrivs line to read.)
      const { out } = await probeB(
        [
          "grep -E '^Seccomp:' /proc/self/status | tr '\\t' ' '",
          'unshare -U true 2>/dev/null || echo unshare-refused',
          'unshare -n true 2>/dev/null || echo unshare-net-refused',
        ].join('; '),
      );
      expect(out.map((l) => l.trim())).toEqual([
        'Seccomp: 2',
        'unshare-refused',
        'unshare-net-refused',
      ]);
    });

    it('binds volumes, read-only when asked', async () => {
      const { out, err } = await probeB(
        'echo w > /data/w && echo wrote; echo x > /config/x || echo ro; cat /config/config',
        {
          mounts: [
            { source: path.join(volume, 'rw'), target: '/data', readOnly: false },
            { source: path.join(volume, 'ro'), target: '/config', readOnly: true },
          ],
        },
      );
      expect(out).toEqual(['wrote', 'ro', 'setting=1']);
      expect(err.join('\n')).toMatch(/Read-only file system/);
      expect(await readFile(path.join(volume, 'rw/w'), 'utf8')).toBe('w\n');
      expect(await exists(path.join(volume, 'ro/x'))).toBe(false);
    });

    it('tells the files API it cannot reach the machine through the Sentry, and the policy its netstack is its own', async () => {
      const record = { image: { config: {} } } as unknown as MachineRecord;
      const guest = await guestOf(record, await bed.sandboxes.record('a'));
      expect(guest?.filesReachable).toBe(false);
      expect(guest?.ownNetworkStack).toBe(true); // the network policy goes on the host
    });

    it('starts runsc in a private mount namespace, with only constant shell text', () => {
      const argv = runArgv('runsc', ['runsc', '--root', '/r', '--network=sandbox'], {
        id: 'm',
        bundle: '/b',
        pidFile: '/b/p',
        procDir: '/b/proc',
        netns: '/run/netns/x; rm -rf /',
      });
      expect(argv.slice(0, 6)).toEqual([
        'unshare',
        '--mount',
        '--propagation',
        'private',
        '--',
        'sh',
      ]);
      expect(argv[7]).not.toContain('/run/netns'); // paths arrive as "$1", "$2"
      expect(argv.slice(9, 11)).toEqual(['/b/proc', '/run/netns/x; rm -rf /']);
      const none = runArgv('runsc', ['runsc', '--root', '/r', '--network=sandbox'], {
        id: 'm',
        bundle: '/b',
        pidFile: '/b/p',
        procDir: '/b/proc',
      });
      expect(none).toEqual([
        'runsc',
        '--root',
        '/r',
        '--network=none',
        'run',
        '--bundle',
        '/b',
        '--pid-file',
        '/b/p',
        'm',
      ]);
    });

    it('stops on SIGTERM through runsc kill, and leaves no sandbox behind', async () => {
      const record = await bed.sandboxes.record('a');
      const status = await bed.sandboxes.stop('a', { timeoutMs: 10_000 });
      expect(status).toMatchObject({ code: 143, signal: 'SIGTERM' });
      expect(await bed.sandboxes.find('a')).toBeUndefined();
      const command = bed.sandboxes.commandFor(record);
      const list = await exec([...command, 'list', '-q']);
      expect(list.out.trim()).toBe('');
      expect(await bed.cgroups.pids('a')).toEqual([]);
    });
  },
);
