/**
 * host-redundant PostgreSQL: a synchronous streaming standby on a second instance. When
 * the primary's process dies, the standby is promoted behind the same URL, no committed
 * row is lost, and a new standby is built.
 */
import { readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';
import { createDatabase, platformCa, query, waitFor } from './helpers.js';

let tp: TestPlatform;
let org: TestOrg;
let ca: string;

const record = async (name: string) =>
  (await tp.request('GET', `/v1/resources/${name}`, { token: org.token })).body;

beforeAll(async () => {
  tp = await startTestPlatform();
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
    await query(db.url, ca, 'CREATE TABLE payments (id int PRIMARY KEY)');
    for (let i = 1; i <= 200; i++) await query(db.url, ca, 'INSERT INTO payments VALUES ($1)', [i]);

    // The primary's postmaster is the parent of our backend.
    const [me] = await query<{ pid: number }>(db.url, ca, 'SELECT pg_backend_pid() AS pid');
    const status = await readFile(`/proc/${me!.pid}/status`, 'utf8').catch(() => '');
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
  });
});
