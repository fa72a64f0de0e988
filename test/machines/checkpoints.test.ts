/**
 * Machine checkpoints through the API, on the real local runtime and storage pool: a
 * file written into a running machine is checkpointed, changed and brought back by a
 * restore (with and without keeping the current disk), list with and without automatic
 * checkpoints, delete, the errors (404s, 409 duplicate and busy, 501 memory, 400), the
 * crash leftovers of a restore, and destroy removing every checkpoint's disk.
 */
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { busyboxLayer } from '../../src/runtime/images/build.test-helper.js';
import { checkpointTick } from '../../src/services/machines/checkpoints.js';
import { waitFor } from '../databases/helpers.js';
import type { TestOrg, TestPlatform } from '../helpers/platform.js';
import { canRunMachines as root, startMachineBed, type MachineBed } from './bed.js';

let bed: MachineBed;
let tp: TestPlatform;
let org: TestOrg;
let other: TestOrg;
let image: string;

const req = (method: string, p: string, body?: unknown, token = org.token) =>
  tp.request(method, p, { token, body });

async function pool() {
  return (await tp.platform.ctx.pool.get()).pool;
}

/** The pool volumes holding checkpoints of machine `id`. */
async function checkpointVolumes(id: string): Promise<string[]> {
  const prefix = `mck-${id.replace(/^mch-/, '')}-`;
  return (await (await pool()).list()).filter((v) => v.startsWith(prefix));
}

/** The machine's root as the host sees it while it runs (the overlay mount). */
function hostRoot(id: string): string {
  return path.join(tp.dataDir, 'machines', `${id}.root`);
}

/** A file as the machine serves it (busybox httpd serving its whole root). */
async function served(ip: string, file: string): Promise<string> {
  const res = await fetch(`http://${ip}:3000/${file}`);
  return res.status === 200 ? res.text() : `HTTP ${res.status}`;
}

async function createMachine(app: string, extra: Record<string, unknown> = {}) {
  const res = await req('POST', `/v1/apps/${app}/machines`, {
    image,
    start: 'echo booted; exec httpd -f -p 3000 -h /',
    ...extra,
  });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body as { id: string; privateIp: string };
}

beforeAll(async () => {
  if (!root) return;
  bed = await startMachineBed('pk', 120);
  tp = bed.tp;
  org = bed.org;
  image = await bed.image('files:1', { layers: [busyboxLayer()], config: {} });
  other = await tp.createOrg();
  for (const name of ['ck', 'ckauto', 'ckstop'])
    expect((await req('POST', '/v1/apps', { name })).status).toBe(201);
}, 120_000);

afterAll(async () => {
  await bed?.close();
});

describe.skipIf(!root)('machine checkpoints', () => {
  let m: { id: string; privateIp: string };
  let saved: string;

  it('describes its routes in the OpenAPI document', async () => {
    const doc = (await tp.request('GET', '/v1/openapi.json')).body;
    const list = doc.paths['/v1/machines/{id}/checkpoints'];
    expect(list.post.requestBody.content['application/json'].schema.properties.label).toBeDefined();
    expect(list.get).toBeDefined();
    expect(doc.paths['/v1/machines/{id}/checkpoints/{label}'].delete).toBeDefined();
    expect(doc.paths['/v1/machines/{id}/checkpoints/{label}/restore'].post).toBeDefined();
  });

  it('checkpoints the disk of a running machine and restores it, saving the current disk first', async () => {
    m = await createMachine('ck');
    await writeFile(path.join(hostRoot(m.id), 'marker.txt'), 'one\n');
    expect(await served(m.privateIp, 'marker.txt')).toBe('one\n');

    const made = await req('POST', `/v1/machines/${m.id}/checkpoints`, { label: 'first' });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    expect(made.body).toMatchObject({
      label: 'first',
      machineId: m.id,
      auto: false,
      memory: false,
    });
    expect(Date.parse(made.body.createdAt)).toBeGreaterThan(Date.now() - 60_000);
    const machine = (await req('GET', `/v1/machines/${m.id}`)).body;
    expect(machine.checkpointAt).toBe(made.body.createdAt);
    expect(machine.observedState).toBe('running');
    expect(await served(m.privateIp, 'marker.txt')).toBe('one\n');

    await writeFile(path.join(hostRoot(m.id), 'marker.txt'), 'two\n');
    expect(await served(m.privateIp, 'marker.txt')).toBe('two\n');

    const restored = await req('POST', `/v1/machines/${m.id}/checkpoints/first/restore`);
    expect(restored.status, JSON.stringify(restored.body)).toBe(200);
    expect(restored.body).toMatchObject({
      id: m.id,
      observedState: 'running',
      desiredState: 'running',
      restoredFrom: 'first',
    });
    expect(restored.body.savedAs).toMatch(/^before-restore-\d+$/);
    saved = restored.body.savedAs;
    expect(await served(m.privateIp, 'marker.txt')).toBe('one\n');

    const list = await req('GET', `/v1/machines/${m.id}/checkpoints`);
    expect(list.status).toBe(200);
    expect(list.body.map((c: { label: string }) => c.label)).toEqual(['first', saved]);
  });

  it('keeps the console log across a restore (cursors never go back)', async () => {
    const logs = await waitFor(
      async () => {
        const res = await req('GET', `/v1/apps/ck/logs?machine=${m.id}`);
        const booted = res.body.entries.filter((e: { text: string }) => e.text === 'booted');
        return booted.length === 2 ? res.body : undefined;
      },
      'two boots in the log',
      10_000,
    );
    expect(logs.entries.filter((e: { text: string }) => e.text === 'booted')).toHaveLength(2);
  });

  it('restores with keepCurrent false without saving, back to the saved disk', async () => {
    const res = await req('POST', `/v1/machines/${m.id}/checkpoints/${saved}/restore`, {
      keepCurrent: false,
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.savedAs).toBeUndefined();
    expect(res.body.restoredFrom).toBe(saved);
    expect(await served(m.privateIp, 'marker.txt')).toBe('two\n');
    const list = await req('GET', `/v1/machines/${m.id}/checkpoints`);
    expect(list.body).toHaveLength(2);
    // The checkpoint restored from stays, untouched by what the machine writes now.
    await writeFile(path.join(hostRoot(m.id), 'marker.txt'), 'three\n');
    await req('POST', `/v1/machines/${m.id}/checkpoints/${saved}/restore`, {
      keepCurrent: false,
    });
    expect(await served(m.privateIp, 'marker.txt')).toBe('two\n');
  });

  it('numbers checkpoints without a label, refuses a duplicate label and validates the body', async () => {
    const a = await req('POST', `/v1/machines/${m.id}/checkpoints`);
    expect(a.status, JSON.stringify(a.body)).toBe(201);
    expect(a.body.label).toMatch(/^v\d+$/);
    const b = await req('POST', `/v1/machines/${m.id}/checkpoints`, {});
    expect(Number(b.body.label.slice(1))).toBeGreaterThan(Number(a.body.label.slice(1)));

    const dup = await req('POST', `/v1/machines/${m.id}/checkpoints`, { label: 'first' });
    expect(dup.status).toBe(409);
    expect(dup.body.code).toBe('already-exists');

    const bad = await req('POST', `/v1/machines/${m.id}/checkpoints`, {
      label: 'Bad_Label',
      memory: 'yes',
      extra: 1,
    });
    expect(bad.status).toBe(400);
    expect(bad.body.code).toBe('bad-request');
    expect(bad.body.issues.map((i: { path: string }) => i.path).sort()).toEqual([
      'extra',
      'label',
      'memory',
    ]);
    const long = await req('POST', `/v1/machines/${m.id}/checkpoints`, { label: 'x'.repeat(64) });
    expect(long.status).toBe(400);
    const badRestore = await req('POST', `/v1/machines/${m.id}/checkpoints/first/restore`, {
      keepCurrent: 'no',
    });
    expect(badRestore.status).toBe(400);
    expect(badRestore.body.issues[0].path).toBe('keepCurrent');
    const badQuery = await req('GET', `/v1/machines/${m.id}/checkpoints?auto=maybe`);
    expect(badQuery.status).toBe(400);
  });

  it('answers 501 not-implemented for memory, with the reason', async () => {
    const res = await req('POST', `/v1/machines/${m.id}/checkpoints`, {
      label: 'mem',
      memory: true,
    });
    expect(res.status).toBe(501);
    expect(res.body.code).toBe('not-implemented');
    expect(res.body.error).toMatch(/CRIU/);
    expect(res.body.error).toMatch(/Omit memory/);
    const list = await req('GET', `/v1/machines/${m.id}/checkpoints`);
    expect(list.body.map((c: { label: string }) => c.label)).not.toContain('mem');
  });

  it('answers 404 for unknown and foreign machines and unknown labels', async () => {
    for (const [method, p] of [
      ['GET', '/v1/machines/mch-nope/checkpoints'],
      ['POST', '/v1/machines/mch-nope/checkpoints'],
      ['DELETE', '/v1/machines/mch-nope/checkpoints/first'],
      ['POST', '/v1/machines/mch-nope/checkpoints/first/restore'],
    ] as const) {
      const res = await req(method, p);
      expect(res.status, `${method} ${p}`).toBe(404);
      expect(res.body.code).toBe('not-found');
    }
    const foreign = await req('GET', `/v1/machines/${m.id}/checkpoints`, undefined, other.token);
    expect(foreign.status).toBe(404);
    expect(foreign.body).toEqual({ error: `Machine '${m.id}' not found.`, code: 'not-found' });
    const mine = await req('GET', '/v1/machines/mch-nope');
    expect(foreign.body.error).toBe(mine.body.error.replace('mch-nope', m.id));
    const foreignRestore = await req(
      'POST',
      `/v1/machines/${m.id}/checkpoints/first/restore`,
      undefined,
      other.token,
    );
    expect(foreignRestore.status).toBe(404);

    const restore = await req('POST', `/v1/machines/${m.id}/checkpoints/nope/restore`);
    expect(restore.status).toBe(404);
    expect(restore.body.code).toBe('checkpoint-not-found');
    const del = await req('DELETE', `/v1/machines/${m.id}/checkpoints/nope`);
    expect(del.status).toBe(404);
    expect(del.body.code).toBe('checkpoint-not-found');
  });

  it('answers 409 machine-busy while another operation is under way', async () => {
    const db = tp.platform.ctx.db;
    await db
      .updateTable('machines')
      .set({ observed_state: 'starting' })
      .where('id', '=', m.id)
      .execute();
    try {
      const restore = await req('POST', `/v1/machines/${m.id}/checkpoints/first/restore`);
      expect(restore.status).toBe(409);
      expect(restore.body.code).toBe('machine-busy');
      const take = await req('POST', `/v1/machines/${m.id}/checkpoints`);
      expect(take.status).toBe(409);
      expect(take.body.code).toBe('machine-busy');
    } finally {
      await db
        .updateTable('machines')
        .set({ observed_state: 'running' })
        .where('id', '=', m.id)
        .execute();
    }
  });

  it('deletes a checkpoint and its disk', async () => {
    const before = await checkpointVolumes(m.id);
    const del = await req('DELETE', `/v1/machines/${m.id}/checkpoints/first`);
    expect(del.status).toBe(204);
    const list = await req('GET', `/v1/machines/${m.id}/checkpoints`);
    expect(list.body.map((c: { label: string }) => c.label)).not.toContain('first');
    expect((await checkpointVolumes(m.id)).length).toBe(before.length - 1);
    expect((await req('DELETE', `/v1/machines/${m.id}/checkpoints/first`)).status).toBe(404);
    expect((await req('POST', `/v1/machines/${m.id}/checkpoints/first/restore`)).body.code).toBe(
      'checkpoint-not-found',
    );
  });

  it('checkpoints and restores a stopped machine, which stays stopped', async () => {
    const s = await createMachine('ckstop');
    await writeFile(path.join(hostRoot(s.id), 'marker.txt'), 'kept\n');
    expect((await req('POST', `/v1/machines/${s.id}/stop`)).body.observedState).toBe('stopped');
    const made = await req('POST', `/v1/machines/${s.id}/checkpoints`, { label: 'cold' });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    expect((await req('POST', `/v1/machines/${s.id}/start`)).body.observedState).toBe('running');
    await writeFile(path.join(hostRoot(s.id), 'marker.txt'), 'changed\n');
    expect((await req('POST', `/v1/machines/${s.id}/stop`)).status).toBe(200);
    const restored = await req('POST', `/v1/machines/${s.id}/checkpoints/cold/restore`, {
      keepCurrent: true,
    });
    expect(restored.status, JSON.stringify(restored.body)).toBe(200);
    expect(restored.body).toMatchObject({ observedState: 'stopped', restoredFrom: 'cold' });
    expect(restored.body.savedAs).toMatch(/^before-restore-/);
    const started = await req('POST', `/v1/machines/${s.id}/start`);
    expect(started.body.observedState).toBe('running');
    expect(await served(started.body.privateIp, 'marker.txt')).toBe('kept\n');
  });

  it('clears what a restore interrupted by a crash left, keeping the disk in use', async () => {
    // As if pier died after making the new disk but before switching to it.
    const recordFile = path.join(tp.dataDir, 'machines', `${m.id}.json`);
    const record = JSON.parse(await readFile(recordFile, 'utf8'));
    const leftover = `m-${m.id.replace(/^mch-/, '')}-deadbeef`;
    await (await pool()).create(leftover);
    expect((await req('POST', `/v1/machines/${m.id}/stop`)).status).toBe(200);
    await writeFile(recordFile, JSON.stringify({ ...record, restoring: leftover }));
    // The next pier reads the record from disk, as after the crash.
    await bed.restart();
    tp = bed.tp;
    expect((await req('POST', `/v1/machines/${m.id}/start`)).body.observedState).toBe('running');
    expect(await (await pool()).info(leftover)).toBeUndefined();
    const after = JSON.parse(await readFile(recordFile, 'utf8'));
    expect(after.volume).toBe(record.volume);
    expect(after.restoring).toBeUndefined();
    expect(await served(m.privateIp, 'marker.txt')).toBe('two\n');
  });

  it('takes automatic checkpoints at checkpointIntervalS, keeps the newest three, lists them with auto=1', async () => {
    const a = await createMachine('ckauto', { checkpointIntervalS: 5 });
    // The platform's own ticker takes the first one.
    const first = await waitFor(
      async () => {
        const res = await req('GET', `/v1/machines/${a.id}/checkpoints?auto=1`);
        return res.body.length > 0 ? res.body : undefined;
      },
      'an automatic checkpoint',
      20_000,
    );
    expect(first[0]).toMatchObject({ machineId: a.id, auto: true, memory: false });
    expect(first[0].label).toMatch(/^auto-\d+$/);
    expect((await req('GET', `/v1/machines/${a.id}`)).body.checkpointAt).toBeDefined();
    // Time moves on faster here: each tick finds the interval passed.
    for (let i = 1; i <= 5; i++) await checkpointTick(tp.platform.ctx, Date.now() + i * 6_000);
    const all = await req('GET', `/v1/machines/${a.id}/checkpoints?auto=1`);
    expect(all.body.length).toBe(3);
    expect(all.body.every((c: { auto: boolean }) => c.auto)).toBe(true);
    const labels = all.body.map((c: { label: string }) => Number(c.label.slice(5)));
    expect(Math.min(...labels)).toBeGreaterThan(Number(first[0].label.slice(5)));
    expect((await checkpointVolumes(a.id)).length).toBeGreaterThanOrEqual(3);
    expect((await checkpointVolumes(a.id)).length).toBeLessThanOrEqual(4); // one may be in flight

    // A named one beside them: the plain list shows only it.
    await req('POST', `/v1/machines/${a.id}/checkpoints`, { label: 'mine' });
    const plain = await req('GET', `/v1/machines/${a.id}/checkpoints`);
    expect(plain.body.map((c: { label: string }) => c.label)).toEqual(['mine']);
    const withAuto = await req('GET', `/v1/machines/${a.id}/checkpoints?auto=true`);
    expect(withAuto.body.length).toBeGreaterThanOrEqual(4);
    // An automatic one restores like any other.
    const res = await req('POST', `/v1/machines/${a.id}/checkpoints/${all.body[2].label}/restore`);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.observedState).toBe('running');
  });

  it('destroying a machine removes its checkpoints and their disks', async () => {
    expect((await checkpointVolumes(m.id)).length).toBeGreaterThan(0);
    const res = await req('POST', `/v1/machines/${m.id}/destroy`);
    expect(res.body.observedState).toBe('deleted');
    expect(await checkpointVolumes(m.id)).toEqual([]);
    const rows = await tp.platform.ctx.db
      .selectFrom('machine_checkpoints')
      .select('id')
      .where('machine_id', '=', m.id)
      .execute();
    expect(rows).toEqual([]);
    expect((await req('GET', `/v1/machines/${m.id}/checkpoints`)).status).toBe(404);
  });
});
