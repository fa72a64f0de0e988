/**
 * Kill -9 at every step of every durable operation: `pier serve` SIGKILLs itself at each
 * crash point an operation passes (test/helpers/crash-harness.ts), is started again, and
 * the operation must finish or end with a reason, leaving nothing behind. A real `pier
 * serve` process, real databases, one data dir and one state store for every round.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  crashAtEveryPoint,
  startCrashBed,
  waitUntil,
  type CrashBed,
  type CrashOperation,
  type RoundReport,
} from '../helpers/crash-harness.js';

let bed: CrashBed;
const reports: RoundReport[] = [];

beforeAll(async () => {
  bed = await startCrashBed({
    tables: ['databases', 'database_instances', 'database_archives', 'names'],
  });
}, 120_000);

afterAll(async () => {
  for (const r of reports) console.log(`${r.ms} ms: ${r.points.join(', ')}`);
  if (!bed) return;
  for (const d of (await bed.api('GET', '/v1/resources').catch(() => undefined))?.body ?? []) {
    await bed.api('DELETE', `/v1/resources/${d.name}`);
  }
  await bed.close();
}, 120_000);

/** Waits until a database is no longer `restoring`: ready, or failed with its reason. */
async function databaseSettles(name: string): Promise<{ state: string; stateReason?: string }> {
  const end = await waitUntil(
    async () => {
      const r = await bed.api('GET', `/v1/resources/${name}`);
      expect(r.status, `${name}: ${JSON.stringify(r.body)}`).toBe(200);
      return r.body.state !== 'restoring' ? r.body : undefined;
    },
    `${name} to settle`,
    90_000,
  );
  if (end.state === 'failed') expect(end.stateReason, `${name} failed`).toBeTruthy();
  else expect(end.state).toBe('ready');
  return end;
}

async function createDatabase(name: string): Promise<void> {
  const made = await bed.api('POST', '/v1/resources', { name, kind: 'postgres' });
  expect(made.status, JSON.stringify(made.body)).toBe(201);
}

async function deleteDatabase(name: string): Promise<void> {
  const gone = await bed.api('DELETE', `/v1/resources/${name}`);
  expect([204, 404], JSON.stringify(gone.body)).toContain(gone.status);
}

let rounds = 0;
/** A copy of `source` (branch or fork) under a name of its own each round. */
function copyOperation(kind: 'branch' | 'fork', source: string): CrashOperation<string> {
  return {
    name: `database ${kind}`,
    kinds: ['databases.copy'],
    async start() {
      const name = `${kind}-${++rounds}`;
      const made = await bed.api('POST', `/v1/resources/${source}/${kind}`, { name });
      expect(made.status, JSON.stringify(made.body)).toBe(202);
      return name;
    },
    settle: async (_bed, name) => void (await databaseSettles(name)),
    remove: (_bed, name) => deleteDatabase(name),
  };
}

/**
 * A restore in place of a database of the round's own (a restore keeps the old timeline's
 * archive, so the bed's state comes back only once the database itself is removed).
 */
const restoreOperation: CrashOperation<{ name: string; preserved: string }> = {
  name: 'database restore',
  kinds: ['databases.restore'],
  async start() {
    const name = `restored-${++rounds}`;
    await createDatabase(name);
    // The archive's first base backup, which the restore reads.
    await waitUntil(
      async () => {
        const r = await bed.store.query(
          `SELECT count(*)::int AS n FROM jobs WHERE kind = 'databases.base-backup'
            AND state = 'done' AND payload->>'databaseId' =
              (SELECT id FROM databases WHERE name = $1)`,
          [name],
        );
        return r.rows[0].n > 0;
      },
      'the first base backup',
      60_000,
    );
    const asOf = new Date().toISOString();
    const r = await bed.api('POST', `/v1/resources/${name}/restore`, { asOf });
    expect(r.status, JSON.stringify(r.body)).toBe(202);
    return { name, preserved: r.body.preservedUnderName as string };
  },
  async settle(_bed, { name, preserved }) {
    await databaseSettles(name);
    await databaseSettles(preserved);
  },
  async remove(_bed, { name, preserved }) {
    await deleteDatabase(preserved);
    await deleteDatabase(name);
  },
};

describe('kill -9 at every step', () => {
  it('databases: branch, fork and restore finish or end with a reason, leaving nothing', async () => {
    await createDatabase('source');
    await databaseSettles('source');
    reports.push(
      ...(await crashAtEveryPoint(bed, [
        restoreOperation,
        copyOperation('branch', 'source'),
        copyOperation('fork', 'source'),
      ])),
    );
    await deleteDatabase('source');
  }, 600_000);
});
