/**
 * The failover contract between the database runtime and the databases service: the
 * runtime promotes a standby and reports it through `onFailover` (it writes no rows),
 * and the service's handler rewrites the instance rows and queues a new standby, in one
 * transaction. A fake engine stands in for PostgreSQL; the store is real.
 */
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EngineEnv, InstanceSpec, ReplicatingEngine } from '../../src/engines/engine.js';
import type { TcpFront } from '../../src/engines/front/tcp-front.js';
import { failover, loseStandby, type RedundancyDeps } from '../../src/engines/local/failover.js';
import type { LiveDatabase } from '../../src/engines/local/live.js';
import type { DatabaseRuntimeEvents, FailoverEvent } from '../../src/engines/runtime.js';
import { JobCatalogue } from '../../src/jobs/catalogue.js';
import { databaseJobs } from '../../src/services/databases/jobs.js';
import { databaseRuntimeEvents } from '../../src/services/databases/runtime-events.js';
import { openStore, type Store } from '../../src/store/db.js';
import { migrate } from '../../src/store/migrate.js';
import { createTestDatabase, type TestDatabase } from '../helpers/database.js';

let tdb: TestDatabase;
let store: Store;
let events: DatabaseRuntimeEvents;

beforeAll(async () => {
  tdb = await createTestDatabase();
  store = openStore(tdb.url);
  await migrate(store.pool);
  const jobs = new JobCatalogue(
    databaseJobs(() => {
      throw new Error('no job runs in this test');
    }),
  );
  events = databaseRuntimeEvents({ db: store.db, jobs });
}, 60_000);
afterAll(async () => {
  await store?.close();
  await tdb?.drop();
});

const spec = (id: string, internalPort: number): InstanceSpec => ({
  id,
  volume: `pg-${id}`,
  internalPort,
  memoryMb: 256,
  sizeGb: 1,
  password: 'pw',
});

let seeded = 0;

/** A redundant database in the store: a primary and a standby instance. */
async function seed(id: string): Promise<void> {
  seeded++;
  const org = `org-${id}`;
  await store.db
    .insertInto('orgs')
    .values({ id: org, name: org, region: 'local' } as never)
    .execute();
  await store.db
    .insertInto('names')
    .values({ name: id, kind: 'database', org_id: org } as never)
    .execute();
  await store.db
    .insertInto('databases')
    .values({
      id,
      org_id: org,
      name: id,
      kind: 'postgres',
      host: 'local',
      port: 40000 + seeded,
      memory_mb: 256,
      size_gb: 1,
      persistent: false,
      durability: 'host-redundant',
      password_nonce: Buffer.alloc(12),
      password_ciphertext: Buffer.alloc(16),
    } as never)
    .execute();
  await store.db
    .insertInto('database_instances')
    .values([
      { id: `${id}-a`, database_id: id, role: 'primary', volume: 'pg-a', internal_port: 2 },
      { id: `${id}-b`, database_id: id, role: 'standby', volume: 'pg-b', internal_port: 3 },
    ] as never)
    .execute();
}

/** A fake engine and runtime side that record what failover asks of them. */
function fakeRuntime(events: RedundancyDeps['events']) {
  const calls: string[] = [];
  const engine = {
    kind: 'postgres',
    promote: async (_env: EngineEnv, i: InstanceSpec) => void calls.push(`promote ${i.id}`),
    destroy: async (_env: EngineEnv, i: InstanceSpec) => void calls.push(`destroy ${i.id}`),
    stop: async () => undefined,
    start: async () => undefined,
    detachStandby: async (_env: EngineEnv, i: InstanceSpec) => void calls.push(`detach ${i.id}`),
  } as unknown as ReplicatingEngine;
  let target = 0;
  const front = {
    setTarget: (port: number) => (target = port),
    lastActivityAt: 0,
  } as unknown as TcpFront;
  const deps: RedundancyDeps = {
    engine,
    env: {} as EngineEnv,
    log: pino({ level: 'silent' }),
    adopt: async (_live, inst) => void calls.push(`adopt ${inst.id}`),
    dropCgroup: async (id) => void calls.push(`drop ${id}`),
    events: {
      onFailover: async (e) => {
        calls.push(`onFailover ${e.promoted} ${e.removed}`);
        await events.onFailover(e);
      },
      onStandbyLost: async (id) => {
        calls.push(`onStandbyLost ${id}`);
        await events.onStandbyLost(id);
      },
    },
  };
  return { calls, deps, front, target: () => target };
}

function liveOf(id: string, front: TcpFront): LiveDatabase {
  return {
    id,
    kind: 'postgres',
    front,
    ready: true,
    primary: spec(`${id}-a`, 2),
    standby: spec(`${id}-b`, 3),
    power: 'running',
    policy: null,
    memoryMb: 256,
    busy: 0,
    lastBusyAt: 0,
    queue: Promise.resolve(),
    // No such process: the primary counts as dead.
    primaryPid: 2 ** 22 + 1,
  };
}

async function instances(id: string) {
  return store.db
    .selectFrom('database_instances')
    .select(['id', 'role'])
    .where('database_id', '=', id)
    .orderBy('id')
    .execute();
}

async function queuedRebuilds(id: string): Promise<number> {
  const rows = await store.db
    .selectFrom('jobs')
    .select('payload')
    .where('kind', '=', 'databases.rebuild-standby')
    .where('state', '=', 'queued')
    .execute();
  return rows.filter((r) => (r.payload as { databaseId: string }).databaseId === id).length;
}

describe('failover events', () => {
  it('reports a promotion, and the service rewrites the instance rows', async () => {
    await seed('db-fo');
    const seen: FailoverEvent[] = [];
    const rt = fakeRuntime({
      onFailover: async (e) => {
        seen.push(e);
        await events.onFailover(e);
      },
      onStandbyLost: (id) => events.onStandbyLost(id),
    });
    const live = liveOf('db-fo', rt.front);

    await failover(rt.deps, live);

    expect(seen).toEqual([{ databaseId: 'db-fo', promoted: 'db-fo-b', removed: 'db-fo-a' }]);
    // Reported once the standby serves, before the dead primary's volume goes.
    expect(rt.calls).toEqual([
      'promote db-fo-b',
      'adopt db-fo-b',
      'onFailover db-fo-b db-fo-a',
      'destroy db-fo-a',
      'drop db-fo-a',
    ]);
    expect(rt.target()).toBe(3);
    expect(live.primary?.id).toBe('db-fo-b');
    expect(live.standby).toBeUndefined();
    expect(await instances('db-fo')).toEqual([{ id: 'db-fo-b', role: 'primary' }]);
    expect(await queuedRebuilds('db-fo')).toBe(1);
  });

  it('keeps the dead primary when the rows could not be written', async () => {
    const rt = fakeRuntime({
      onFailover: async () => {
        throw new Error('store unreachable');
      },
      onStandbyLost: async () => undefined,
    });
    await expect(failover(rt.deps, liveOf('db-x', rt.front))).rejects.toThrow('store unreachable');
    expect(rt.calls.some((c) => c.startsWith('destroy'))).toBe(false);
  });

  it('reports a lost standby, and the service queues a new one', async () => {
    await seed('db-sl');
    const rt = fakeRuntime(events);
    const live = { ...liveOf('db-sl', rt.front), primaryPid: undefined, standbyPid: 2 ** 22 + 1 };

    await loseStandby(rt.deps, live);

    expect(rt.calls).toEqual(['detach db-sl-a', 'onStandbyLost db-sl']);
    expect(live.standbyPid).toBeUndefined();
    expect(await instances('db-sl')).toHaveLength(2);
    expect(await queuedRebuilds('db-sl')).toBe(1);
  });

  it('records the power the runtime reports', async () => {
    await seed('db-pw');
    await events.onPowerChanged('db-pw', 'suspended');
    const row = await store.db
      .selectFrom('databases')
      .select('power')
      .where('id', '=', 'db-pw')
      .executeTakeFirstOrThrow();
    expect(row.power).toBe('suspended');
  });
});
