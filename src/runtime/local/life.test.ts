/**
 * A machine's life after create: stop (politely, by the image's STOPSIGNAL, and after
 * killTimeoutS by force), start again on the same writable layer, suspend and resume,
 * logs by cursor, destroy leaving nothing, and recovery by a new runtime after a restart.
 */
import { access, readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mountedType, netnsName } from '../sandbox/index.js';
import { LocalRuntime } from './local-runtime.js';
import {
  busybox,
  makeRuntimeBed,
  runtimeUnavailable,
  type RuntimeBed,
} from './testbed.test-helper.js';

const unavailable = await runtimeUnavailable();
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const exists = (p: string) =>
  access(p).then(
    () => true,
    () => false,
  );

describe.skipIf(unavailable)(
  `local runtime: life${unavailable ? ` (skipped: ${unavailable})` : ''}`,
  () => {
    let bed: RuntimeBed;
    let image: string;
    beforeAll(async () => {
      bed = await makeRuntimeBed('ll', '10.217.0.0/16');
      image = await bed.push('life', {
        layers: [busybox()],
        config: {
          Cmd: [
            '/bin/sh',
            '-c',
            'trap "echo got usr1; exit 0" USR1; echo up; while true; do sleep 0.05; done',
          ],
          StopSignal: 'SIGUSR1',
        },
      });
    });
    afterAll(() => bed?.cleanup());

    it('stops and starts again with the writable layer kept', async () => {
      const spec = bed.spec('keep', image, {
        start:
          'if [ -f /marker ]; then echo "again: $(cat /marker)"; else echo kept > /marker; echo first; fi; exec sleep 1000',
      });
      await bed.runtime.create(spec);
      await bed.waitOutput(spec.id, 'first');
      await bed.runtime.stop(spec);
      const stopped = await bed.runtime.status(spec.id);
      // `exec sleep` dies of the image's STOPSIGNAL (SIGUSR1), the default killSignal.
      expect(stopped).toMatchObject({ state: 'stopped', exit: { signal: 'SIGUSR1' } });
      expect(
        await mountedType(path.join(bed.options.dataDir, 'machines', `${spec.id}.root`)),
      ).toBeUndefined();
      await bed.runtime.stop(spec); // idempotent

      const t0 = performance.now();
      const { bootMs } = await bed.runtime.start(spec);
      console.log(
        `start from stopped: ${Math.round(performance.now() - t0)} ms (bootMs ${bootMs})`,
      );
      await bed.waitOutput(spec.id, 'again: kept');
      expect((await bed.runtime.status(spec.id)).state).toBe('running');
      await bed.runtime.stop(spec);
    });

    it("stops with the image's STOPSIGNAL by default", async () => {
      const spec = bed.spec('stopsignal', image);
      await bed.runtime.create(spec);
      await bed.waitOutput(spec.id, 'up');
      await bed.runtime.stop(spec);
      expect(await bed.output(spec.id)).toContain('got usr1');
      expect(await bed.runtime.status(spec.id)).toMatchObject({
        state: 'stopped',
        exit: { code: 0 },
      });
    });

    it('sends SIGKILL after killTimeoutS to a process that ignores the signal', async () => {
      const spec = bed.spec('stubborn', image, {
        start: 'trap "" TERM; echo ready; while true; do sleep 0.05; done',
        killSignal: 'SIGTERM',
        killTimeoutS: 1,
      });
      await bed.runtime.create(spec);
      await bed.waitOutput(spec.id, 'ready');
      const t0 = Date.now();
      await bed.runtime.stop(spec);
      const took = Date.now() - t0;
      expect(took).toBeGreaterThanOrEqual(950);
      expect(took).toBeLessThan(4000);
      expect(await bed.runtime.status(spec.id)).toMatchObject({
        state: 'stopped',
        exit: { signal: 'SIGKILL' },
      });
      expect(await bed.cgroups.pids(spec.id)).toEqual([]);
    });

    it('suspends (the counter stops), resumes (it goes on), and pages logs by cursor', async () => {
      const spec = bed.spec('counter', image, {
        start: 'i=0; while true; do i=$((i+1)); echo "n $i"; sleep 0.03; done',
      });
      await bed.runtime.create(spec);
      await bed.waitOutput(spec.id, 'n 10');

      const last = await bed.runtime.logs(spec.id, { limit: 3 });
      expect(last.entries).toHaveLength(3);
      const n = (text: string) => Number(text.split(' ')[1]);
      await sleep(150); // a few more lines after the cursor
      const next = await bed.runtime.logs(spec.id, { after: last.cursor, limit: 2 });
      expect(next.entries.map((e) => n(e.text))).toEqual([
        n(last.entries[2]!.text) + 1,
        n(last.entries[2]!.text) + 2,
      ]);
      expect(next.cursor).toBe(last.cursor + 2);
      expect(next.entries[0]).toMatchObject({ stream: 'stdout', at: expect.any(String) });

      await bed.runtime.suspend(spec.id);
      await bed.runtime.suspend(spec.id); // idempotent
      expect((await bed.runtime.status(spec.id)).state).toBe('suspended');
      await sleep(100); // the keeper may still read what was written just before
      const frozenAt = (await bed.runtime.logs(spec.id, { limit: 1 })).cursor;
      await sleep(300);
      expect((await bed.runtime.logs(spec.id, { after: frozenAt, limit: 100 })).entries).toEqual(
        [],
      );

      const t0 = performance.now();
      await bed.runtime.resume(spec.id);
      console.log(`resume: ${(performance.now() - t0).toFixed(1)} ms`);
      expect((await bed.runtime.status(spec.id)).state).toBe('running');
      await sleep(200);
      expect(
        (await bed.runtime.logs(spec.id, { after: frozenAt, limit: 100 })).entries.length,
      ).toBeGreaterThan(1);
    });

    it('destroys a machine leaving no process, mount, netns, cgroup, volume or state', async () => {
      const spec = bed.spec('gone', image);
      await bed.runtime.create(spec);
      await bed.waitOutput(spec.id, 'up');
      await bed.runtime.suspend(spec.id); // destroy copes with a frozen machine too
      const root = path.join(bed.options.dataDir, 'machines', `${spec.id}.root`);
      expect(await mountedType(root)).toBe('overlay');

      await bed.runtime.destroy(spec.id);
      expect(await bed.runtime.status(spec.id)).toEqual({ state: 'missing' });
      expect(await mountedType(root)).toBeUndefined();
      expect(await readFile('/proc/self/mountinfo', 'utf8')).not.toContain(spec.id);
      expect(await exists(`/run/netns/${netnsName(spec.id)}`)).toBe(false);
      for (const d of bed.cgroups.dirs(spec.id)) expect(await exists(d)).toBe(false);
      expect(await bed.pool.info('m-ll-gone')).toBeUndefined();
      expect(await exists(path.join(bed.options.dataDir, 'machines', `${spec.id}.json`))).toBe(
        false,
      );
      expect(await exists(root)).toBe(false);
      expect(await bed.runtime.logs(spec.id, { limit: 10 })).toEqual({
        entries: [],
        cursor: 0,
        truncated: false,
      });
      await bed.runtime.destroy(spec.id); // idempotent
    });

    it('is recovered by a new runtime after a restart of pier, addresses kept', async () => {
      const running = bed.spec('survivor', image);
      const stopped = bed.spec('sleeper', image);
      const { privateIp } = await bed.runtime.create(running);
      await bed.runtime.create(stopped);
      await bed.runtime.stop(stopped);

      const later = new LocalRuntime(bed.options);
      const found = await later.recover();
      expect(found).toContain(running.id);
      expect(found).not.toContain(stopped.id);
      expect(await later.status(running.id)).toEqual({ state: 'running', privateIp });
      expect(await later.address(running.id, 8080)).toEqual({ host: privateIp, port: 8080 });
      // A new machine never gets an address the old runtime gave out.
      const fresh = await later.create(bed.spec('fresh', image));
      expect([privateIp, (await later.status(stopped.id)).privateIp]).not.toContain(
        fresh.privateIp,
      );
      await later.stop(running);
      expect((await bed.runtime.status(running.id)).state).toBe('stopped');
    });
  },
);
