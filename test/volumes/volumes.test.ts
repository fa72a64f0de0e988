/**
 * Volumes (spec 2.6, 4.4): create with a quota in the pool, list, resize, attach to one
 * app, delete refused while attached, durable copies every flushIntervalS, delete
 * removing the data; bounds and organization scope.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { copyPrefix } from '../../src/services/volumes/volumes.js';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';
import { waitFor } from '../databases/helpers.js';

let tp: TestPlatform;
let org: TestOrg;
let other: TestOrg;

const req = (method: string, p: string, body?: unknown, token = org.token) =>
  tp.request(method, p, { token, body });

async function poolVolumes(): Promise<string[]> {
  const { pool } = await tp.platform.ctx.pool.get();
  return pool.list();
}

beforeAll(async () => {
  tp = await startTestPlatform();
  org = await tp.createOrg();
  other = await tp.createOrg();
}, 60_000);
afterAll(async () => tp?.close());

describe('volumes', () => {
  let id: string;

  it('creates a volume with the spec defaults and a pool volume of its size', async () => {
    const res = await req('POST', '/v1/volumes', { name: 'uploads' });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({
      name: 'uploads',
      orgId: org.id,
      sizeGb: 10,
      mountPath: '/data',
      class: 'standard',
      flushIntervalS: 86400,
      leaseGen: 0,
      durableGen: 0,
    });
    expect(res.body.id).toMatch(/^vol-/);
    id = res.body.id;
    const { pool } = await tp.platform.ctx.pool.get();
    const info = await pool.info(`v-${id.replace(/^vol-/, '')}`);
    expect(info).toBeDefined();
    if (pool.kind === 'btrfs') expect(info!.quotaBytes).toBe(10 * 1024 ** 3);
  });

  it('reports every bad field at once and shares the namespace', async () => {
    const bad = await req('POST', '/v1/volumes', {
      name: 'Bad Name',
      sizeGb: 501,
      mountPath: '/proc/x',
      class: 'fast',
      flushIntervalS: 14,
    });
    expect(bad.status).toBe(400);
    expect(bad.body.issues.map((i: { path: string }) => i.path).sort()).toEqual([
      'class',
      'flushIntervalS',
      'mountPath',
      'name',
      'sizeGb',
    ]);
    const traversal = await req('POST', '/v1/volumes', { name: 'dots', mountPath: '/data/../etc' });
    expect(traversal.status).toBe(400);
    const taken = await req('POST', '/v1/volumes', { name: 'uploads' }, other.token);
    expect(taken.status).toBe(409);
    expect(taken.body.code).toBe('name-taken');
  });

  it('lists, resizes, and hides them from other organizations', async () => {
    expect((await req('GET', '/v1/volumes')).body.map((v: { name: string }) => v.name)).toEqual([
      'uploads',
    ]);
    expect((await req('GET', '/v1/volumes', undefined, other.token)).body).toEqual([]);
    const patched = await req('PATCH', `/v1/volumes/${id}`, { sizeGb: 20, flushIntervalS: 600 });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({ sizeGb: 20, flushIntervalS: 600 });
    const theirs = await req('PATCH', `/v1/volumes/${id}`, { sizeGb: 1 }, other.token);
    expect(theirs.status).toBe(404);
  });

  it('attaches to one app, refuses delete while attached, and detaches', async () => {
    await req('POST', '/v1/apps', { name: 'files' });
    await req('POST', '/v1/apps', { name: 'files-2' });
    const att = await req('POST', '/v1/apps/files/attach', { volume: 'uploads' });
    expect(att.status).toBe(200);
    expect(att.body).toEqual({ appName: 'files', volumeName: 'uploads', mountPath: '/data' });
    expect((await req('GET', '/v1/volumes')).body[0].appName).toBe('files');
    const second = await req('POST', '/v1/apps/files-2/attach', { volume: 'uploads' });
    expect(second.body.code).toBe('volume-attached');
    const del = await req('DELETE', `/v1/volumes/${id}`);
    expect(del.status).toBe(409);
    expect(del.body.code).toBe('volume-attached');
    expect((await req('DELETE', `/v1/volumes/${id}/attachment`)).status).toBe(204);
    expect((await req('GET', '/v1/volumes')).body[0].appName).toBeUndefined();
    const again = await req('DELETE', `/v1/volumes/${id}/attachment`);
    expect(again.body.code).toBe('not-attached');
    // Through the app's routes too.
    await req('POST', '/v1/apps/files/attach', { volume: 'uploads' });
    expect((await req('POST', '/v1/apps/files/detach', { volume: 'uploads' })).status).toBe(200);
  });

  it('deletes a detached volume with its data, and frees the name', async () => {
    const pv = `v-${id.replace(/^vol-/, '')}`;
    expect(await poolVolumes()).toContain(pv);
    expect((await req('DELETE', `/v1/volumes/${id}`)).status).toBe(204);
    expect(await poolVolumes()).not.toContain(pv);
    expect((await req('DELETE', `/v1/volumes/${id}`)).status).toBe(404);
    expect((await req('POST', '/v1/buckets', { name: 'uploads' })).status).toBe(201);
  });

  it('copies a durable volume every flushIntervalS and keeps the last two copies', async () => {
    const res = await req('POST', '/v1/volumes', {
      name: 'ledger-data',
      class: 'durable',
      flushIntervalS: 15,
    });
    expect(res.status).toBe(201);
    const vid: string = res.body.id;
    // Make each copy come now rather than in 15 s: the queued flush is moved forward on
    // every poll, since the next one is queued only once the last has finished.
    const durableGen = async (gen: number) => {
      await tp.platform.ctx.db
        .updateTable('jobs')
        .set({ run_at: new Date() })
        .where('kind', '=', 'volumes.flush')
        .where('state', '=', 'queued')
        .execute();
      const v = (await req('GET', '/v1/volumes')).body.find((x: { id: string }) => x.id === vid);
      return v.durableGen >= gen ? v : undefined;
    };
    const first = await waitFor(() => durableGen(1), 'the first durable copy');
    expect(first.durableAt).toBeDefined();
    expect((await poolVolumes()).filter((n) => n.startsWith(copyPrefix(vid)))).toEqual([
      `${copyPrefix(vid)}1`,
    ]);
    for (let gen = 2; gen <= 3; gen++) await waitFor(() => durableGen(gen), `durable copy ${gen}`);
    // The job records a generation before it removes the copies past the last two.
    const kept = `${copyPrefix(vid)}2,${copyPrefix(vid)}3`;
    await waitFor(async () => {
      const copies = (await poolVolumes()).filter((n) => n.startsWith(copyPrefix(vid))).sort();
      return copies.join(',') === kept ? copies : undefined;
    }, 'the oldest copy removed');
    expect((await req('DELETE', `/v1/volumes/${vid}`)).status).toBe(204);
    expect((await poolVolumes()).filter((n) => n.startsWith(copyPrefix(vid)))).toEqual([]);
  }, 60_000);
});
