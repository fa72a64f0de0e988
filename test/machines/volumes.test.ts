/**
 * Machines with volumes through the API: `volumeGb` makes the app's volume and mounts it,
 * the lease (machineId, leaseHost, leaseGen) follows the machine that holds it, a second
 * holder is refused with 503 lease-held, one machine per volume-backed app, and a
 * deploy-style replace that stops the old machine before the new one takes the volume.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { busyboxLayer } from '../../src/runtime/images/build.test-helper.js';
import { canRunMachines, startMachineBed, type MachineBed } from './bed.js';

let bed: MachineBed;
let image: string;

beforeAll(async () => {
  if (!canRunMachines) return;
  bed = await startMachineBed('pv', 160);
  image = await bed.image('vol:1', {
    layers: [busyboxLayer()],
    config: {
      Cmd: ['/bin/sh', '-c', 'echo "gen $GEN" >> /data/boots; exec httpd -f -p 3000 -h /data'],
    },
  });
  for (const name of ['vol', 'other']) {
    expect((await bed.req('POST', '/v1/apps', { name })).status).toBe(201);
  }
}, 120_000);

afterAll(async () => {
  await bed?.close();
});

const volume = async (name: string) =>
  (await bed.req('GET', '/v1/volumes')).body.find((v: { name: string }) => v.name === name);

async function read(machine: string, path: string): Promise<string> {
  const res = await fetch(`${bed.tp.url}/v1/machines/${machine}/files?path=${path}`, {
    headers: { authorization: `Bearer ${bed.org.token}` },
  });
  return res.text();
}

describe.skipIf(!canRunMachines)('machines with volumes', () => {
  let first: string;
  let second: string;

  it('makes the app’s volume from volumeGb, mounts it, and leases it to the machine', async () => {
    const made = await bed.req('POST', '/v1/apps/vol/machines', {
      image,
      volumeGb: 1,
      env: { GEN: '1' },
    });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    first = made.body.id;
    expect(await volume('vol-data')).toMatchObject({
      sizeGb: 1,
      mountPath: '/data',
      appName: 'vol',
      machineId: first,
      leaseHost: 'local',
      leaseGen: 1,
    });
    expect(await read(first, '/data/boots')).toBe('gen 1\n');
  });

  it('runs exactly one machine of a volume-backed app', async () => {
    const more = await bed.req('POST', '/v1/apps/vol/machines', { image });
    expect([more.status, more.body.code]).toEqual([409, 'volume-needs-single-machine']);
  });

  it('replaces the machine deploy-style: the old one stops, the new one takes the volume', async () => {
    const made = await bed.req('POST', `/v1/apps/vol/machines?replace=${first}`, {
      image,
      env: { GEN: '2' },
    });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    second = made.body.id;
    // The data came along; the old machine had stopped before the new one booted.
    expect(await read(second, '/data/boots')).toBe('gen 1\ngen 2\n');
    expect(await volume('vol-data')).toMatchObject({ machineId: second, leaseGen: 2 });
    await expect
      .poll(async () => (await bed.req('GET', `/v1/machines/${first}`)).body.observedState, {
        timeout: 10_000,
      })
      .toBe('deleted');
    const unknown = await bed.req('POST', '/v1/apps/vol/machines?replace=mch-none', { image });
    expect(unknown.status).toBe(404);
  });

  it('gives the lease back on stop, and refuses a second holder with 503 lease-held', async () => {
    expect((await bed.req('POST', `/v1/machines/${second}/stop`)).status).toBe(200);
    const freed = await volume('vol-data');
    expect(freed.machineId).toBeUndefined();
    expect(freed.leaseHost).toBeUndefined();
    // The volume moves to another app, whose machine takes it.
    expect((await bed.req('POST', '/v1/apps/vol/detach', { volume: 'vol-data' })).status).toBe(200);
    expect((await bed.req('POST', '/v1/apps/other/attach', { volume: 'vol-data' })).status).toBe(
      200,
    );
    const third = await bed.req('POST', '/v1/apps/other/machines', { image, env: { GEN: '3' } });
    expect(third.status, JSON.stringify(third.body)).toBe(201);
    expect(await volume('vol-data')).toMatchObject({ machineId: third.body.id, leaseGen: 3 });
    // The old machine still names the volume: it may not mount it while the other holds it.
    const again = await bed.req('POST', `/v1/machines/${second}/start`);
    expect([again.status, again.body.code]).toEqual([503, 'lease-held']);
    expect((await bed.req('GET', `/v1/machines/${second}`)).body.observedState).toBe('stopped');
    // Deleting an attached volume is refused; destroying the holder frees the lease.
    const del = await bed.req('DELETE', `/v1/volumes/${(await volume('vol-data')).id}`);
    expect(del.body.code).toBe('volume-attached');
    expect((await bed.req('POST', `/v1/machines/${third.body.id}/destroy`)).status).toBe(200);
    expect((await volume('vol-data')).machineId).toBeUndefined();
    const started = await bed.req('POST', `/v1/machines/${second}/start`);
    expect(started.body.observedState).toBe('running');
    expect(await read(second, '/data/boots')).toBe('gen 1\ngen 2\ngen 3\ngen 2\n');
  });
});
