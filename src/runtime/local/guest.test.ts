/**
 * Reaching into a running machine from the host: its files through the root of its
 * process (the machine's view, with its /tmp), and shell sessions in its namespaces, as
 * its user, in its cgroup, on a terminal or on pipes; killing a session kills its tree.
 */
import { readdir, readFile } from 'node:fs/promises';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GuestFiles } from '../files/guest-files.js';
import {
  busybox,
  finishSession,
  makeRuntimeBed,
  runtimeUnavailable,
  type RuntimeBed,
} from './testbed.test-helper.js';

const unavailable = await runtimeUnavailable();

/** Host pids of the test's `sleep 1234` and `sleep 1235`. */
async function sleepers(): Promise<string[]> {
  const found: string[] = [];
  for (const pid of await readdir('/proc')) {
    const cmd = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
    if (cmd === 'sleep\u00001234\u0000' || cmd === 'sleep\u00001235\u0000') found.push(pid);
  }
  return found;
}

describe.skipIf(unavailable)(
  `local runtime: guest files and shells${unavailable ? ` (skipped: ${unavailable})` : ''}`,
  () => {
    let bed: RuntimeBed;
    let id: string;
    beforeAll(async () => {
      bed = await makeRuntimeBed('lg', '10.218.0.0/16');
      const image = await bed.push('guest', {
        layers: [
          busybox(),
          [
            {
              path: 'etc/passwd',
              content: 'root:x:0:0::/root:/bin/sh\nweb:x:1000:1000::/home/web:/bin/sh\n',
            },
            // The user's home is its own (the files API writes as the machine's user).
            { path: 'home/web/', uid: 1000, gid: 1000 },
          ],
        ],
        config: {
          Cmd: ['/bin/sh', '-c', 'echo secret-in-tmp > /tmp/t; echo up; exec sleep 1000'],
          User: 'web',
          WorkingDir: '/home/web',
          Env: ['FROM_IMAGE=yes'],
        },
      });
      const spec = bed.spec('guest', image, { env: { FROM_SPEC: 'also' } });
      id = spec.id;
      await bed.runtime.create(spec);
      await bed.waitOutput(id, 'up');
    });
    afterAll(() => bed?.cleanup());

    it('knows the running process, its user and its environment', async () => {
      const guest = await bed.runtime.guest(id);
      expect(guest).toMatchObject({ uid: 1000, gid: 1000, cwd: '/home/web' });
      expect(guest?.env).toMatchObject({ FROM_IMAGE: 'yes', FROM_SPEC: 'also' });
    });

    it('reads and writes the machine’s own view of its files', async () => {
      const guest = (await bed.runtime.guest(id))!;
      const files = await GuestFiles.of(guest.initPid, guest.mainPid);
      try {
        const { stream } = await files.read('/tmp/t', 1024);
        let text = '';
        for await (const c of stream) text += String(c);
        expect(text).toBe('secret-in-tmp\n');
        await files.write('/home/web/hello', Readable.from([Buffer.from('hi')]), {
          mode: 0o644,
          cap: 100,
        });
      } finally {
        await files.close();
      }
      const s = await bed.runtime.shell(id, {
        argv: ['/bin/sh', '-c', 'cat hello; id -u; pwd'],
        tty: false,
        cols: 80,
        rows: 24,
      });
      expect(await finishSession(s)).toMatchObject({ stdout: 'hi1000\n/home/web\n', code: 0 });
    });

    it('runs a command on pipes inside the namespaces, with stdin, stderr and the exit code', async () => {
      const s = await bed.runtime.shell(id, {
        argv: [
          '/bin/sh',
          '-c',
          'cat; echo oops >&2; hostname; echo $FROM_SPEC; ls /proc | grep -c "^[0-9]"; exit 7',
        ],
        tty: false,
        cols: 80,
        rows: 24,
      });
      const r = await finishSession(s, 'from stdin\n');
      expect(r.stdout.split('\n').slice(0, 3)).toEqual(['from stdin', 'guest', 'also']);
      expect(r.stderr).toBe('oops\n');
      expect(r.code).toBe(7);
      // Only the machine's processes are visible: init, main, the session's sh and ls/grep.
      expect(Number(r.stdout.split('\n')[3])).toBeLessThan(8);
    });

    it('runs a shell on a terminal, with its size', async () => {
      const s = await bed.runtime.shell(id, { tty: true, cols: 100, rows: 30 });
      const done = finishSession(s);
      // Typed at the prompt, as a person does: runc sets its console up (size, raw mode)
      // once the shell is started, and a line typed before may reach a half-made terminal.
      let seen = '';
      await new Promise<void>((resolve) =>
        s.onData((_stream, d) => {
          seen += d.toString();
          if (seen.includes('$ ')) resolve();
        }),
      );
      s.write(Buffer.from('stty size; exit 3\n'));
      const r = await done;
      expect(r.stdout).toContain('30 100');
      expect(r.code).toBe(3);
    });

    it('runs a session in the machine’s cgroup, and kills its whole tree', async () => {
      const s = await bed.runtime.shell(id, {
        argv: ['/bin/sh', '-c', 'sleep 1234 & sleep 1235'],
        tty: false,
        cols: 80,
        rows: 24,
      });
      const done = finishSession(s);
      await expect.poll(sleepers, { timeout: 5000 }).toHaveLength(2);
      for (const pid of await sleepers()) {
        expect(await readFile(`/proc/${pid}/cgroup`, 'utf8')).toContain(`/${id}\n`);
      }
      s.kill();
      const r = await done;
      expect(r.signal ?? r.code).toBeTruthy();
      expect(await sleepers()).toEqual([]);
    });

    it('has no guest for a stopped machine, and refuses a shell', async () => {
      expect(await bed.runtime.guest('mch-nothing')).toBeUndefined();
      await expect(
        bed.runtime.shell('mch-nothing', { tty: false, cols: 80, rows: 24 }),
      ).rejects.toThrow(/not running/);
    });
  },
);
