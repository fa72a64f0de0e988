/**
 * A sandbox's life: started by a Node process that then exits, logging on without it,
 * found again, signalled, stopped (politely, then not), held to its cgroup's limits.
 * Machines here have no netns of their own: runc gives them a private `lo`-only one.
 */
import { spawn } from 'node:child_process';
import { readFile, stat } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LOG_SEGMENTS } from './logs.js';
import { isRunning, procRef, sleep } from './proc.js';
import { makeBed, sandboxUnavailable, type Bed } from './testbed.test-helper.js';

const unavailable = await sandboxUnavailable();

/** Polls `cond` every 20 ms for up to `ms`. */
async function until(cond: () => Promise<boolean>, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error('condition not reached in time');
    await sleep(20);
  }
}

/** Starts a sandbox from a separate Node process, which exits once it runs. */
async function startFromChild(bed: Bed, spec: unknown): Promise<{ pid: number; parent: number }> {
  const helper = path.join(
    path.dirname(fileURLToPath(import.meta.url)),
    'start-child.test-helper.ts',
  );
  const tsx = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;
  const arg = JSON.stringify({ cgroupRoot: bed.cgroupRoot, runDir: bed.runDir, spec });
  const child = spawn(process.execPath, ['--import', tsx, helper, arg], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d));
  child.stderr.on('data', (d: Buffer) => (err += d));
  const code = await new Promise<number | null>((r) => child.on('exit', r));
  if (code !== 0) throw new Error(`starter failed (${code}): ${err}`);
  return JSON.parse(out) as { pid: number; parent: number };
}

describe.skipIf(unavailable)(
  `sandbox lifecycle${unavailable ? ` (skipped: ${unavailable})` : ''}`,
  () => {
    let bed: Bed;
    beforeAll(async () => {
      bed = await makeBed('life');
    });
    afterAll(() => bed?.cleanup());

    it('keeps running and logging after the Node process that started it exits', async () => {
      const script =
        'i=0; while true; do i=$((i+1)); echo "tick $i"; echo "tock $i" >&2; sleep 0.05; done';
      const spec = await bed.spec('ticker', script);
      const { pid, parent } = await startFromChild(bed, spec);
      const starterGone = new Date().toISOString();
      expect(await procRef(parent)).toBeUndefined();
      // This Sandboxes instance never started it: it finds it by its record, as after a restart.
      expect(await bed.sandboxes.find('ticker')).toBe(pid);
      const record = await bed.sandboxes.record('ticker');
      expect(await isRunning(record?.keeper)).toBe(true);
      await sleep(400);
      const page = await bed.sandboxes.logs('ticker', { limit: 100_000 });
      const later = page.entries.filter((e) => e.at > starterGone);
      expect(later.filter((e) => e.stream === 'stdout').length).toBeGreaterThan(3);
      expect(later.filter((e) => e.stream === 'stderr').length).toBeGreaterThan(3);
      expect(page.entries[0]).toMatchObject({
        seq: 1,
        stream: expect.any(String),
        text: expect.stringMatching(/^t[io]ck 1$/),
      });
      for (const e of page.entries) expect(Date.parse(e.at)).not.toBeNaN();
      // Following with the cursor picks up exactly what came next.
      await sleep(150);
      const next = await bed.sandboxes.logs('ticker', { after: page.cursor });
      expect(next.entries[0]?.seq).toBe(page.cursor + 1);
      // A signal reaches the process (busybox sh dies of SIGUSR1), and the sandbox ends with it.
      expect(await bed.sandboxes.signal('ticker', 'SIGUSR1')).toBe(true);
      expect(await bed.sandboxes.waitExit('ticker', 5000)).toMatchObject({
        code: 138,
        signal: 'SIGUSR1',
      });
      expect(await bed.sandboxes.find('ticker')).toBeUndefined();
      expect(await bed.cgroups.pids('ticker')).toEqual([]);
      expect(await bed.sandboxes.signal('ticker', 'SIGUSR1')).toBe(false);
    });

    it('keeps the log under its cap after lots of output', async () => {
      const cap = 64 * 1024;
      const { status, entries } = await bed.probe(
        'chatty',
        'i=0; while [ $i -lt 20000 ]; do echo "line $i of a great deal of output"; i=$((i+1)); done',
        { logMaxBytes: cap },
      );
      expect(status.code).toBe(0);
      const sizes = await Promise.all(
        LOG_SEGMENTS.map((f) => stat(path.join(bed.dir, 'chatty/state', f)).then((s) => s.size)),
      );
      expect(sizes[0]! + sizes[1]!).toBeLessThanOrEqual(cap);
      expect(entries.at(-1)?.text).toBe('line 19999 of a great deal of output');
      expect(entries.length).toBeLessThan(20000); // the oldest rotated away
    });

    it('stops a cooperative process with SIGTERM', async () => {
      const spec = await bed.spec(
        'polite',
        "trap 'echo bye; exit 0' TERM; echo up; while true; do sleep 0.05; done",
      );
      await bed.sandboxes.run(spec);
      await until(async () =>
        (await bed.sandboxes.logs('polite')).entries.some((e) => e.text === 'up'),
      );
      const t0 = Date.now();
      const status = await bed.sandboxes.stop('polite', { timeoutMs: 5000 });
      expect(status).toMatchObject({ code: 0, signal: null });
      expect(Date.now() - t0).toBeLessThan(2000);
      const { entries } = await bed.sandboxes.logs('polite');
      expect(entries.at(-1)?.text).toBe('bye');
    });

    it('escalates to SIGKILL for the whole cgroup when SIGTERM is ignored', async () => {
      // It ignores SIGTERM, and so do the daemons it leaves around.
      const script =
        "trap '' TERM; sleep 1000 & sleep 1000 & echo up; while true; do sleep 1; done";
      await bed.sandboxes.run(await bed.spec('stubborn', script));
      await until(async () =>
        (await bed.sandboxes.logs('stubborn')).entries.some((e) => e.text === 'up'),
      );
      // The init, the shell and its two daemons (and the loop's sleep, now and then).
      expect((await bed.cgroups.pids('stubborn')).length).toBeGreaterThanOrEqual(4);
      const t0 = Date.now();
      const status = await bed.sandboxes.stop('stubborn', { timeoutMs: 300 });
      const took = Date.now() - t0;
      expect(status?.signal).toBe('SIGKILL');
      expect(took).toBeGreaterThanOrEqual(300);
      expect(took).toBeLessThan(3000);
      expect(await bed.cgroups.pids('stubborn')).toEqual([]);
    });

    it('reports exit codes, and ends leftover processes with the main one', async () => {
      const { status } = await bed.probe('leaver', 'sleep 1000 & echo started; exit 3');
      expect(status).toMatchObject({ code: 3, signal: null });
      expect(await bed.cgroups.pids('leaver')).toEqual([]);
    });

    it('kills what allocates beyond the memory limit', async () => {
      await bed.machine('hungry', { memoryBytes: 32 << 20 });
      expect((await bed.cgroups.limits('hungry')).memoryBytes).toBe(32 << 20);
      const { out } = await bed.probe(
        'hungry',
        'dd if=/dev/zero of=/dev/null bs=64M count=1 2>/dev/null; echo "dd exit $?"',
      );
      expect(out).toEqual(['dd exit 137']); // SIGKILL by the OOM killer
    });

    it('holds the process count to the pids limit', async () => {
      await bed.machine('forky', { pids: 12 });
      // Forks until the kernel refuses (busybox sh then gives up), counting as it goes.
      const script = 'i=0; while [ $i -lt 30 ]; do sleep 1000 & i=$((i+1)); echo $i; done';
      const { status, out, err } = await bed.probe('forky', script);
      expect(status.code).toBe(2);
      expect(err).toContain("/bin/sh: can't fork: Resource temporarily unavailable");
      // 12 tasks: the sandbox's init (pid 1), the shell and 10 sleeps.
      expect(Number(out.at(-1))).toBe(10);
      expect(await bed.cgroups.pids('forky')).toEqual([]);
    });

    it('refuses to start twice, and a failed start leaves nothing behind', async () => {
      await bed.sandboxes.run(await bed.spec('once', 'sleep 1000'));
      await expect(bed.sandboxes.run(await bed.spec('once', 'sleep 1000'))).rejects.toThrow(
        /already running/,
      );
      await bed.sandboxes.stop('once', { timeoutMs: 100 });
      // A file bound onto a directory: runc, already running, fails while mounting.
      const spec = await bed.spec('orphan', 'echo never');
      const mounts = [{ source: '/etc/hostname', target: '/bin', readOnly: true }];
      await expect(bed.sandboxes.run({ ...spec, mounts })).rejects.toThrow(/not a directory/);
      const record = await bed.sandboxes.record('orphan');
      expect(record).toBeUndefined();
      const keeperLog = await readFile(path.join(spec.stateDir, 'keeper.log'), 'utf8');
      expect(keeperLog).toMatch(/start failed/);
      await until(async () => !(await bed.sandboxes.logs('orphan').catch(() => undefined)));
    });

    it('reports a program that cannot be run as an exit, with the reason on stderr', async () => {
      const { status, err } = await bed.probe('lost', '', { argv: ['/no/such/program'] });
      expect(status.code).toBe(127);
      expect(err.join('\n')).toMatch(/exec \/no\/such\/program failed: No such file or directory/);
    });

    it('times a start against a plain fork and exec', async () => {
      const runs = 5;
      let sandboxMs = 0;
      let forkMs = 0;
      for (let i = 0; i < runs; i++) {
        const spec = await bed.spec('timed', 'echo ready; sleep 1000');
        const t0 = performance.now();
        await bed.sandboxes.run(spec);
        const started = performance.now();
        await until(
          async () =>
            (await bed.sandboxes.logs('timed', { tail: 1 })).entries.at(-1)?.text === 'ready',
          5000,
        );
        sandboxMs += started - t0;
        await bed.sandboxes.stop('timed', { timeoutMs: 100 });
        const f0 = performance.now();
        const child = spawn('/bin/busybox', ['true'], { stdio: 'ignore' });
        await new Promise((r) => child.on('exit', r));
        forkMs += performance.now() - f0;
      }
      console.log(
        `sandbox start → running: ${(sandboxMs / runs).toFixed(1)} ms; fork+exec+exit baseline: ${(forkMs / runs).toFixed(1)} ms`,
      );
      expect(sandboxMs / runs).toBeLessThan(3000);
    });
  },
);
