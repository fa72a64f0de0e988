/**
 * host-redundant PostgreSQL: a synchronous streaming standby on a second instance. When
 * the primary's process dies, the standby is promoted behind the same URL, no committed
 * row is lost, and a new standby is built.
 */
import { readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';
import {
  createDatabase,
  localDatabases,
  pgClient,
  platformCa,
  postmastersOf,
  query,
  storagePool,
  waitFor,
} from './helpers.js';

let tp: TestPlatform;
let org: TestOrg;
let ca: string;
let standbyId: string;
let url: string;

/** The path of an instance's volume in the pool. */
async function volumeOf(instanceId: string): Promise<string> {
  const row = await tp.platform.ctx.db
    .selectFrom('database_instances')
    .select('volume')
    .where('id', '=', instanceId)
    .executeTakeFirstOrThrow();
  const pool = await storagePool(tp);
  return `${pool.root}/${row.volume}`;
}

const record = async (name: string) =>
  (await tp.request('GET', `/v1/resources/${name}`, { token: org.token })).body;

beforeAll(async () => {
  tp = await startTestPlatform({ logLevel: (process.env.PIER_TEST_LOG as 'warn') ?? 'silent' });
  org = await tp.createOrg();
  ca = await platformCa(tp);
}, 60_000);
afterAll(async () => tp?.close());

describe('host-redundant', () => {
  it('promotes the standby when the primary dies, losing no committed row', async () => {
    const db = await createDatabase(tp, org, {
      name: 'ledger',
      kind: 'postgres',
      durability: 'host-redundant',
    });
    expect(db).toMatchObject({ durability: 'host-redundant' });
    expect(db.primaryMachineId).toMatch(/^dbi-/);
    expect(db.standbyMachineId).toMatch(/^dbi-/);
    // 200 commits, each acknowledged by the standby, on one connection (not 200 handshakes).
    const writer = pgClient(db.url, ca);
    await writer.connect();
    await writer.query('CREATE TABLE payments (id int PRIMARY KEY)');
    for (let i = 1; i <= 200; i++) await writer.query('INSERT INTO payments VALUES ($1)', [i]);
    await writer.end();

    // The primary's postmaster is the parent of our backend.
    const c = pgClient(db.url, ca);
    await c.connect();
    const me = (await c.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0];
    const status = await readFile(`/proc/${me!.pid}/status`, 'utf8');
    await c.end();
    const ppid = Number(/PPid:\s+(\d+)/.exec(status)?.[1]);
    expect(ppid).toBeGreaterThan(1);
    process.kill(ppid, 'SIGKILL');

    const after = await waitFor(
      async () => {
        const r = await record('ledger');
        return r.primaryMachineId === db.standbyMachineId ? r : undefined;
      },
      'the standby to be promoted',
      30_000,
    );
    expect(after.primaryMachineId).toBe(db.standbyMachineId);
    const [count] = await waitFor(
      () => query<{ n: number }>(db.url, ca, 'SELECT count(*)::int AS n FROM payments'),
      'the promoted primary to answer',
      20_000,
    );
    expect(count!.n).toBe(200);
    // Writes work on the new primary (it does not wait for a standby it lacks).
    await query(db.url, ca, 'INSERT INTO payments VALUES (201)');

    // A new standby is built.
    const rebuilt = await waitFor(
      async () => {
        const r = await record('ledger');
        return r.standbyMachineId && r.standbyMachineId !== db.standbyMachineId ? r : undefined;
      },
      'a new standby',
      60_000,
    );
    expect(rebuilt.standbyMachineId).not.toBe(db.primaryMachineId);
    standbyId = rebuilt.standbyMachineId;
    url = db.url;
    // As long as its own waits (promotion, first answer, a new standby) on a busy host.
  }, 120_000);

  it('keeps committing when the standby dies, and brings a standby back', async () => {
    const volume = await volumeOf(standbyId);
    // Wait until the rebuilt standby is attached (streaming, synchronous, watched).
    const row = await tp.platform.ctx.db
      .selectFrom('databases')
      .select('id')
      .where('name', '=', 'ledger')
      .executeTakeFirstOrThrow();
    await waitFor(async () => localDatabases(tp).get(row.id)?.standbyPid, 'the standby', 60_000);
    const [pid] = await waitFor(async () => {
      const pids = await postmastersOf(volume);
      return pids.length ? pids : undefined;
    }, 'the standby server');
    process.kill(pid!, 'SIGKILL');
    // A synchronous primary whose standby is gone must not hang its commits.
    const insert = query(url, ca, 'INSERT INTO payments VALUES (202)');
    const hung = new Promise((_, reject) =>
      setTimeout(() => reject(new Error('commit hung without a standby')), 15_000),
    );
    await Promise.race([insert, hung]);
    // One server again on the standby's volume (short-lived helpers such as
    // `postgres -C` may show for a moment, hence waiting for exactly one).
    await waitFor(
      async () => {
        const pids = await postmastersOf(volume);
        return pids.length === 1 && pids[0] !== pid;
      },
      'the standby to come back',
      60_000,
    );
    await query(url, ca, 'INSERT INTO payments VALUES (203)');
    const [count] = await query<{ n: number }>(url, ca, 'SELECT count(*)::int AS n FROM payments');
    expect(count!.n).toBe(203);
  }, 150_000);
});
