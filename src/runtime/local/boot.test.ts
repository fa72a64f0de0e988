/**
 * Creating machines from real images on a real registry: readiness by port, health check
 * and boot; what the process is (Entrypoint, Cmd, `start`, `command`, env, User); and
 * each way a start fails (guest-exited, port-timeout, create-failed).
 */
import { readdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MachineStartError } from '../runtime.js';
import { netnsExists } from '../sandbox/network.js';
import {
  APP_USER_FILES,
  busybox,
  makeRuntimeBed,
  runtimeUnavailable,
  type RuntimeBed,
} from './testbed.test-helper.js';

const unavailable = await runtimeUnavailable();

async function startError(p: Promise<unknown>): Promise<MachineStartError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(MachineStartError);
  return err as MachineStartError;
}

describe.skipIf(unavailable)(
  `local runtime: create${unavailable ? ` (skipped: ${unavailable})` : ''}`,
  () => {
    let bed: RuntimeBed;
    let httpd: string;
    let plain: string;
    beforeAll(async () => {
      bed = await makeRuntimeBed('lb', '10.216.0.0/16');
      httpd = await bed.push('httpd', {
        layers: [
          busybox(),
          [
            { path: 'www/', type: 'dir' },
            { path: 'www/index.html', content: 'hello from pier\n' },
          ],
        ],
        config: {
          Cmd: ['/bin/httpd', '-f', '-p', '3000', '-h', '/www'],
          ExposedPorts: ['3000/tcp'],
        },
      });
      plain = await bed.push('plain', {
        layers: [busybox()],
        config: {
          Entrypoint: ['/bin/echo', 'entry'],
          Cmd: ['from-cmd'],
          Env: ['FROM_IMAGE=image', 'SHARED=image'],
        },
      });
    });
    afterAll(() => bed?.cleanup());

    it('creates an httpd machine, ready once its port answers, reachable from the host', async () => {
      const spec = bed.spec('web', httpd, {
        readiness: 'port',
        healthCheck: {
          path: '/index.html',
          timeoutMs: 1000,
          intervalMs: 100,
          healthyThreshold: 2,
          maxWaitMs: 10_000,
        },
      });
      const { bootMs, privateIp } = await bed.runtime.create(spec);
      expect(privateIp).toMatch(/^10\.216\.\d+\.\d+$/);
      expect(bootMs).toBeGreaterThan(0);
      const res = await fetch(`http://${privateIp}:3000/index.html`);
      expect(await res.text()).toBe('hello from pier\n');
      expect(await bed.runtime.status(spec.id)).toEqual({ state: 'running', privateIp });
      expect(await bed.runtime.address(spec.id, 3000)).toEqual({ host: privateIp, port: 3000 });

      // A second machine of the cached image, ready by port alone, gets another address.
      const again = bed.spec('web2', httpd, { readiness: 'port' });
      const t0 = performance.now();
      const second = await bed.runtime.create(again);
      const total = Math.round(performance.now() - t0);
      expect(second.privateIp).not.toBe(privateIp);
      expect(await (await fetch(`http://${second.privateIp}:3000/`)).text()).toBe(
        'hello from pier\n',
      );
      console.log(`create (cached image) → ready by port: ${total} ms (bootMs ${second.bootMs})`);
      // Creating again (a retried job) is a no-op that answers the same.
      expect((await bed.runtime.create(again)).privateIp).toBe(second.privateIp);
    });

    it('runs Entrypoint + Cmd, `command` in place of Cmd, `start` through the shell', async () => {
      const a = bed.spec('cmd', plain);
      await bed.runtime.create(a);
      await bed.waitOutput(a.id, 'entry from-cmd');

      const b = bed.spec('command', plain, { command: ['one', 'two'] });
      await bed.runtime.create(b);
      await bed.waitOutput(b.id, 'entry one two');

      const c = bed.spec('start', plain, { start: 'echo "$((6 * 7)) from $0"; echo err >&2' });
      await bed.runtime.create(c);
      const out = await bed.waitOutput(c.id, 'err');
      expect(out).toContain('42 from /bin/sh');
      expect(out).not.toContain('entry');
    });

    it('lays the spec env over the image env and defaults PATH, HOME and HOSTNAME', async () => {
      const spec = bed.spec('env', plain, {
        start: 'env; echo done',
        env: { SHARED: 'spec', SPEC_ONLY: 'x y' },
        hostname: 'envhost',
      });
      await bed.runtime.create(spec);
      const lines = (await bed.waitOutput(spec.id, 'done')).split('\n');
      expect(lines).toEqual(
        expect.arrayContaining([
          'FROM_IMAGE=image',
          'SHARED=spec',
          'SPEC_ONLY=x y',
          'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
          'HOME=/root',
          'HOSTNAME=envhost',
        ]),
      );
    });

    it("runs as the image's User, looked up in its /etc/passwd, in its WorkingDir", async () => {
      const ref = await bed.push('user', {
        layers: [busybox(), APP_USER_FILES],
        config: {
          User: 'app',
          WorkingDir: '/home/app/work',
          Cmd: ['/bin/sh', '-c', 'id; pwd; echo "home=$HOME"'],
        },
      });
      const spec = bed.spec('user', ref);
      await bed.runtime.create(spec);
      const out = await bed.waitOutput(spec.id, 'home=');
      expect(out).toContain('uid=1000(app) gid=1000(app)');
      expect(out).toContain('/home/app/work');
      expect(out).toContain('home=/home/app');
    });

    it('binds pool volumes at their mount paths', async () => {
      const vol = await bed.pool.create('lb-data');
      await writeFile(path.join(vol.path, 'hello'), 'from the volume\n');
      const spec = bed.spec('vol', plain, {
        start: 'cat /srv/data/hello; echo more > /srv/data/written; echo done',
        volumes: [{ volume: 'lb-data', mountPath: '/srv/data' }],
      });
      await bed.runtime.create(spec);
      expect(await bed.waitOutput(spec.id, 'done')).toContain('from the volume');
      expect(await readFile(path.join(vol.path, 'written'), 'utf8')).toBe('more\n');
    });

    it('stops a start that is aborted while it waits for the port', async () => {
      const spec = bed.spec('aborted', plain, { readiness: 'port', start: 'sleep 1000' });
      const abort = new AbortController();
      setTimeout(() => abort.abort(new Error('job cancelled')), 300);
      await expect(bed.runtime.create(spec, { signal: abort.signal })).rejects.toThrow(
        'job cancelled',
      );
      expect((await bed.runtime.status(spec.id)).state).toBe('stopped');
    });

    it('fails with guest-exited and the boot log when the process ends during start', async () => {
      const spec = bed.spec('exits', plain, {
        readiness: 'port',
        start: 'echo booting; echo oops >&2; exit 3',
      });
      const err = await startError(bed.runtime.create(spec));
      expect(err.code).toBe('guest-exited');
      expect(err.message).toBe('the process exited with code 3 during start');
      expect(err.bootLog.split('\n')).toEqual(expect.arrayContaining(['booting', 'oops']));
      expect(await bed.runtime.status(spec.id)).toMatchObject({
        state: 'stopped',
        exit: { code: 3 },
      });
    });

    it('fails with port-timeout when the port never opens, and leaves nothing running', async () => {
      const spec = bed.spec('noport', plain, {
        readiness: 'port',
        start: 'echo waiting; sleep 1000',
        healthCheck: { timeoutMs: 500, intervalMs: 100, healthyThreshold: 1, maxWaitMs: 1000 },
      });
      const t0 = Date.now();
      const err = await startError(bed.runtime.create(spec));
      expect(err.code).toBe('port-timeout');
      expect(err.message).toContain('port 3000');
      expect(err.bootLog).toBe('waiting');
      expect(Date.now() - t0).toBeLessThan(5000);
      expect((await bed.runtime.status(spec.id)).state).toBe('stopped');
      expect(await bed.cgroups.pids(spec.id)).toEqual([]);
    });

    it('fails with create-failed naming the image error, and leaves nothing behind', async () => {
      const ref = `${bed.registry.host}/missing:1`;
      const spec = bed.spec('badimage', ref);
      const err = await startError(bed.runtime.create(spec));
      expect(err.code).toBe('create-failed');
      expect(err.message).toContain(ref);
      expect(err.message).toContain('not-found');
      expect(await bed.runtime.status(spec.id)).toEqual({ state: 'missing' });
      expect(await bed.pool.list()).not.toContain('m-lb-badimage');
      expect(await readdir(bed.options.dataDir).catch(() => [])).not.toContain(
        'mch-lb-badimage.json',
      );
    });

    it('holds no record, address or network when the writable layer cannot be made', async () => {
      // The layer is made while the start goes on; something in its place makes it fail.
      const spec = bed.spec('nolayer', plain);
      const squatter = path.join(bed.pool.root, 'm-lb-nolayer');
      await writeFile(squatter, 'not a volume\n');
      try {
        await expect(bed.runtime.create(spec)).rejects.toThrow(/exists/);
        expect(await bed.runtime.status(spec.id)).toEqual({ state: 'missing' });
        expect(await netnsExists(`pier-${spec.id}`)).toBe(false);
        expect(await bed.cgroups.pids(spec.id).catch(() => [])).toEqual([]);
      } finally {
        await rm(squatter, { force: true });
      }
    });

    it('fails with create-failed for a User the image does not define', async () => {
      const ref = await bed.push('nouser', {
        layers: [busybox()],
        config: { User: 'ghost', Cmd: ['true'] },
      });
      const err = await startError(bed.runtime.create(bed.spec('nouser', ref)));
      expect(err.code).toBe('create-failed');
      expect(err.message).toContain('"ghost" is not in the image\'s /etc/passwd');
    });
  },
);
