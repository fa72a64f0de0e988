/**
 * Durable jobs of volumes: the periodic copy of a `durable` volume to the platform
 * archive (a read-only snapshot in the pool; the last two are kept), and removing the data
 * of a deleted volume.
 */
import { z } from 'zod';
import { defineJob, exponentialBackoff } from '../../jobs/catalogue.js';
import type { ServiceContext } from '../context.js';
import { copyPrefix, purgeVolume, scheduleFlush } from './volumes.js';

/** Durable copies kept per volume. */
export const DURABLE_COPIES_KEPT = 2;

export function volumeJobs(get: () => ServiceContext) {
  return [
    defineJob({
      kind: 'volumes.flush',
      payload: z.object({ volumeId: z.string() }),
      maxAttempts: 5,
      backoffMs: exponentialBackoff(5000),
      async run({ volumeId }, job) {
        const ctx = get();
        const v = await ctx.db
          .selectFrom('volumes')
          .selectAll()
          .where('id', '=', volumeId)
          .executeTakeFirst();
        if (!v || v.class !== 'durable') return;
        const gen = v.durable_gen + 1;
        const { pool } = await ctx.pool.get();
        const name = `${copyPrefix(v.id)}${gen}`;
        await job.step(`copy-${gen}`, async () => {
          if (!(await pool.info(name)))
            await pool.snapshot(v.pool_volume, name, { readOnly: true });
          await ctx.db
            .updateTable('volumes')
            .set({ durable_gen: gen, durable_at: ctx.clock() })
            .where('id', '=', v.id)
            .where('durable_gen', '<', gen)
            .execute();
        });
        const copies = (await pool.list())
          .filter((n) => n.startsWith(copyPrefix(v.id)))
          .sort((a, b) => Number(a.split('-').pop()) - Number(b.split('-').pop()));
        for (const old of copies.slice(0, -DURABLE_COPIES_KEPT)) await pool.destroy(old);
        await scheduleFlush(ctx, v.id, v.flush_interval_s, gen + 1);
      },
    }),
    defineJob({
      kind: 'volumes.purge',
      payload: z.object({ poolVolume: z.string(), volumeId: z.string() }),
      maxAttempts: 10,
      backoffMs: exponentialBackoff(2000),
      run: ({ poolVolume, volumeId }) => purgeVolume(get(), poolVolume, volumeId),
    }),
  ];
}
