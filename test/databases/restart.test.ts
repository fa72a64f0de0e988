/**
 * Databases outlive a restart of the control plane: servers keep running while pier is
 * down, and the next start takes every one back (same port, same URL), none lost and none
 * duplicated, with the sleep policy still in force.
 */
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  restartTestPlatform,
  startTestPlatform,
  type TestOrg,
  type TestPlatform,
} from '../helpers/platform.js';
import {
  createDatabase,
  platformCa,
  poolVolumes,
  postmastersOf,
  query,
  settled,
  storagePool,
} from './helpers.js';

let tp: TestPlatform;
let org: TestOrg;
let ca: string;
let pgUrl: string;

beforeAll(async () => {
  tp = await startTestPlatform();
  org = await tp.createOrg();
  ca = await platformCa(tp);
}, 60_000);
afterAll(async () => tp?.close());

async function volumePathOf(name: string): Promise<string> {
  const r = await sql<{ volume: string }>`SELECT i.volume FROM database_instances i
    JOIN databases d ON d.id = i.database_id WHERE d.name = ${name}`.execute(tp.platform.store.db);
  const pool = await storagePool(tp);
  return `${pool.root}/${r.rows[0]!.volume}`;
}

describe('restart of pier', () => {
  it('keeps servers running while down and takes each back once', async () => {
    const pg = await createDatabase(tp, org, { name: 'keep-pg', kind: 'postgres' });
    pgUrl = pg.url;
    await query(pg.url, ca, 'CREATE TABLE t AS SELECT 7 AS n');
    const branch = await tp.request('POST', '/v1/resources/keep-pg/branch', {
      token: org.token,
      body: { name: 'keep-pg-b' },
    });
    expect(branch.status).toBe(202);
    await settled(tp, org, 'keep-pg-b');
    const volume = await volumePathOf('keep-pg');
    const pidsBefore = await postmastersOf(volume);
    expect(pidsBefore.length).toBe(1);
    const volumes = (await poolVolumes(tp)).sort();

    await tp.platform.close();
    // While pier is down the server runs on (only its front is gone).
    expect(await postmastersOf(volume)).toEqual(pidsBefore);

    tp = await restartTestPlatform(tp);
    expect(await query(pg.url, ca, 'SELECT n FROM t')).toEqual([{ n: 7 }]);
    expect(await postmastersOf(volume)).toEqual(pidsBefore);
    expect((await poolVolumes(tp)).sort()).toEqual(volumes);
    const list = await tp.request('GET', '/v1/resources', { token: org.token });
    expect(list.body.map((d: { name: string }) => d.name).sort()).toEqual(['keep-pg', 'keep-pg-b']);
    expect(list.body.every((d: { state: string }) => d.state === 'ready')).toBe(true);
  });

  it('starts again a server that died while pier was down', async () => {
    const volume = await volumePathOf('keep-pg');
    await tp.platform.close();
    for (const pid of await postmastersOf(volume)) process.kill(pid, 'SIGKILL');
    await new Promise((r) => setTimeout(r, 500));
    tp = await restartTestPlatform(tp);
    expect(await query(pgUrl, ca, 'SELECT n FROM t')).toEqual([{ n: 7 }]);
    const res = await tp.request('GET', '/v1/resources/keep-pg', { token: org.token });
    expect(res.body.power).toBe('running');
    expect((await postmastersOf(volume)).length).toBe(1);
  });
});
