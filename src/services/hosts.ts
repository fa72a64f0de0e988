/**
 * The hosts of the platform as the operator sees them (CONTRACT 2): one today, described
 * with its storage pool and what is placed on it, in a shape that holds many tomorrow.
 */
import os from 'node:os';
import type { PoolHandle } from '../storage/pool-handle.js';
import type { ServiceContext } from './context.js';

export async function listHosts(ctx: ServiceContext, pool: PoolHandle) {
  const { pool: p, reason } = await pool.get();
  const usage = await p.usage();
  const buckets = await ctx.db
    .selectFrom('buckets')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .executeTakeFirstOrThrow();
  const databases = await ctx.db
    .selectFrom('databases')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('host', '=', ctx.databases.hostId)
    .executeTakeFirstOrThrow();
  const volumes = await ctx.db
    .selectFrom('volumes')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .executeTakeFirstOrThrow();
  return [
    {
      id: 'local',
      region: ctx.config.region,
      cpus: os.cpus().length,
      memoryBytes: os.totalmem(),
      pool: { ...usage, kind: p.kind, reason },
      objectStore: ctx.blobs.kind,
      running: {
        databases: Number(databases.n),
        machines: 0,
        volumes: Number(volumes.n),
        buckets: Number(buckets.n),
      },
    },
  ];
}
