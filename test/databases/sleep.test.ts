/**
 * The sleep policy of databases (spec 2.4): an idle database is frozen with the cgroup
 * freezer (memory kept), or stopped with mode stop; a new connection wakes it and only
 * sees a slower first connect; stopAfterSeconds stops a suspended one; mode off never
 * sleeps.
 */
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CgroupSet } from '../../src/host/cgroups/cgroup.js';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';
import { createDatabase, localDatabases, platformCa, query, waitFor } from './helpers.js';

let tp: TestPlatform;
let org: TestOrg;
let ca: string;
const urls: Record<string, string> = {};
let canFreeze = false;

const power = async (name: string) =>
  (await tp.request('GET', `/v1/resources/${name}`, { token: org.token })).body.power as string;

async function primaryInstance(name: string): Promise<string> {
  const r = await sql<{ id: string }>`SELECT i.id FROM database_instances i
    JOIN databases d ON d.id = i.database_id WHERE d.name = ${name} AND i.role = 'primary'`.execute(
    tp.platform.store.db,
  );
  return r.rows[0]!.id;
}

beforeAll(async () => {
  canFreeze = (await CgroupSet.detect()) !== undefined;
  tp = await startTestPlatform();
  org = await tp.createOrg();
  ca = await platformCa(tp);
  const made = await Promise.all([
    createDatabase(tp, org, {
      name: 'nap',
      kind: 'postgres',
      suspendPolicy: { mode: 'suspend', idleSeconds: 10 },
    }),
    createDatabase(tp, org, {
      name: 'halt',
      kind: 'postgres',
      suspendPolicy: { mode: 'stop', idleSeconds: 10 },
    }),
    createDatabase(tp, org, {
      name: 'deep',
      kind: 'postgres',
      suspendPolicy: { mode: 'suspend', idleSeconds: 10, stopAfterSeconds: 13 },
    }),
    createDatabase(tp, org, { name: 'awake', kind: 'postgres', suspendPolicy: { mode: 'off' } }),
    createDatabase(tp, org, {
      name: 'big',
      kind: 'postgres',
      memoryMb: 4096,
      suspendPolicy: { mode: 'suspend', idleSeconds: 10 },
    }),
  ]);
  for (const d of made) urls[d.name] = d.url;
  for (const d of made) await query(d.url, ca, 'CREATE TABLE t AS SELECT 42 AS answer');
}, 120_000);
afterAll(async () => tp?.close());

describe('sleep and wake', () => {
  it('freezes an idle database and wakes it on the next connection', async () => {
    await waitFor(
      async () => (await power('nap')) === (canFreeze ? 'suspended' : 'stopped'),
      'nap to sleep',
      // The first sleep waits out the new database's first base backup; on a loaded
      // machine (a full CI run) that took more than 20 s.
      45_000,
    );
    if (canFreeze) {
      expect(await localDatabases(tp).isFrozen(await primaryInstance('nap'))).toBe(true);
    }
    expect(await query(urls.nap!, ca, 'SELECT answer FROM t')).toEqual([{ answer: 42 }]);
    expect(await power('nap')).toBe('running');
  }, 60_000);

  it('stops an idle database with mode stop, and starts it on connect', async () => {
    await waitFor(async () => (await power('halt')) === 'stopped', 'halt to stop', 20_000);
    expect(await query(urls.halt!, ca, 'SELECT answer FROM t')).toEqual([{ answer: 42 }]);
    expect(await power('halt')).toBe('running');
  });

  it('stops a suspended database after stopAfterSeconds', async () => {
    await waitFor(async () => (await power('deep')) === 'stopped', 'deep to stop', 25_000);
    expect(await query(urls.deep!, ca, 'SELECT answer FROM t')).toEqual([{ answer: 42 }]);
  });

  it('stops instead of suspending above 2048 MB, and never sleeps with mode off', async () => {
    await waitFor(async () => (await power('big')) === 'stopped', 'big to stop', 20_000);
    expect(await power('awake')).toBe('running');
    expect(await query(urls.awake!, ca, 'SELECT answer FROM t')).toEqual([{ answer: 42 }]);
  });

  it('keeps a connection that stays open across a freeze working', async () => {
    if (!canFreeze) return;
    await tp.request('PATCH', '/v1/resources/nap', {
      token: org.token,
      body: { suspendPolicy: { mode: 'suspend', idleSeconds: 10 } },
    });
    const { pgClient } = await import('./helpers.js');
    const c = pgClient(urls.nap!, ca);
    await c.connect();
    try {
      await waitFor(async () => (await power('nap')) === 'suspended', 'nap to sleep again', 20_000);
      const r = await c.query('SELECT answer FROM t');
      expect(r.rows).toEqual([{ answer: 42 }]);
    } finally {
      await c.end();
    }
  });
});
