/**
 * Durable jobs of databases. Each is safe to run again after a crash: a copy resumes from
 * its recorded steps, a destroy finds gone what is gone, a backstop finds a finished
 * create finished.
 */
import { sql } from 'kysely';
import { z } from 'zod';
import { newId } from '../../crypto/tokens.js';
import { defineJob, exponentialBackoff } from '../../jobs/catalogue.js';
import { enqueue } from '../../jobs/queue.js';
import { pruneHistory } from './archives.js';
import { runCopyJob } from './copy-work.js';
import { finishCreate, volumeFor } from './create.js';
import { insertInstance, instanceSpec, instancesOf } from './records.js';
import { destroyDatabaseRuntime, removeDatabaseNow } from './remove.js';
import { runRestoreJob } from './restore-work.js';
import { databaseById, destroyArchiveIfUnused, type DatabaseContext } from './work.js';

const instanceRef = z.object({
  id: z.string(),
  volume: z.string(),
  kind: z.enum(['postgres', 'redis']),
});
const copyPayload = z.object({
  databaseId: z.string(),
  sourceId: z.string(),
  copyKind: z.enum(['branch', 'fork']),
  archiveId: z.string().optional(),
  asOf: z.string().optional(),
  target: instanceRef,
});

/**
 * How often a database's archive gets a fresh base backup; each run then prunes the
 * history to the point-in-time window (`pitrWindowDays`, archives.ts `pruneHistory`).
 */
export const BASE_BACKUP_EVERY_MS = 24 * 3600_000;

const COPY_ATTEMPTS = 4;

export function databaseJobs(get: () => DatabaseContext) {
  return [
    defineJob({
      kind: 'databases.copy',
      payload: copyPayload,
      maxAttempts: COPY_ATTEMPTS,
      backoffMs: exponentialBackoff(2000),
      run: (p, job) => runCopyJob(get(), p, job, COPY_ATTEMPTS),
    }),
    defineJob({
      kind: 'databases.restore',
      payload: z.object({
        databaseId: z.string(),
        archiveId: z.string(),
        asOf: z.string(),
        preserved: copyPayload,
        next: z.object({
          id: z.string(),
          volume: z.string(),
          internalPort: z.number(),
          archiveId: z.string().nullable(),
        }),
      }),
      maxAttempts: COPY_ATTEMPTS,
      backoffMs: exponentialBackoff(2000),
      run: (p, job) => runRestoreJob(get(), p, job, COPY_ATTEMPTS),
    }),
    defineJob({
      kind: 'databases.destroy',
      payload: z.object({
        databaseId: z.string(),
        instances: z.array(instanceRef),
        archives: z.array(z.string()),
      }),
      maxAttempts: 20,
      backoffMs: exponentialBackoff(2000),
      run: (p) => destroyDatabaseRuntime(get(), p),
    }),
    defineJob({
      // The backstop of a create whose request died before the database was ready.
      kind: 'databases.finish-create',
      payload: z.object({ databaseId: z.string() }),
      maxAttempts: 3,
      backoffMs: exponentialBackoff(5000),
      async run({ databaseId }, job) {
        const ctx = get();
        const row = await databaseById(ctx.db, databaseId);
        if (!row || row.state !== 'restoring' || row.copy_kind) return;
        const restoring = await sql`SELECT 1 FROM jobs WHERE kind = 'databases.restore'
          AND state IN ('queued', 'running') AND payload->>'databaseId' = ${databaseId}`.execute(
          ctx.db,
        );
        if (restoring.rows.length > 0) return;
        try {
          await finishCreate(ctx, row, await instancesOf(ctx.db, row.id), row.locale);
        } catch (err) {
          if (job.attempt < 3) throw err;
          await removeDatabaseNow(ctx, row.org_id, row.name);
        }
      },
    }),
    defineJob({
      kind: 'databases.base-backup',
      payload: z.object({ databaseId: z.string() }),
      maxAttempts: 5,
      backoffMs: exponentialBackoff(5000),
      async run({ databaseId }, job) {
        const ctx = get();
        const row = await databaseById(ctx.db, databaseId);
        if (!row || row.state !== 'ready' || !row.archive_id) return;
        const primary = (await instancesOf(ctx.db, row.id)).find((i) => i.role === 'primary');
        if (!primary) return;
        const spec = await instanceSpec(ctx.db, ctx.box, row, primary);
        const archiveId = row.archive_id;
        try {
          await ctx.databases.baseBackup(row.id, row.kind, spec);
        } finally {
          // Deleted meanwhile: its delete may have removed the archive before this backup
          // wrote into it again, so it is removed once more here.
          if (!(await databaseById(ctx.db, databaseId))) {
            await destroyArchiveIfUnused(ctx, archiveId, row.kind);
          }
        }
        if (!(await databaseById(ctx.db, databaseId))) return;
        // With a fresh base in the archive, what only moments before the window need goes.
        // A failure here is retried by the next day's run, and must not end the chain.
        await pruneHistory(ctx, databaseId).catch((err: unknown) => {
          ctx.log.warn({ err, databaseId }, 'pruning the history to the window failed');
        });
        await job.step('next', async () => {
          await enqueue(
            ctx.db,
            ctx.jobs,
            'databases.base-backup',
            { databaseId },
            {
              runAt: new Date(Date.now() + BASE_BACKUP_EVERY_MS),
              dedupeKey: `${databaseId}@${Date.now()}`,
            },
          );
        });
      },
    }),
    defineJob({
      // After a failover (or a restore) a redundant database gets a new standby.
      kind: 'databases.rebuild-standby',
      payload: z.object({ databaseId: z.string() }),
      maxAttempts: 10,
      backoffMs: exponentialBackoff(5000),
      async run({ databaseId }) {
        const ctx = get();
        const row = await databaseById(ctx.db, databaseId);
        if (!row || row.durability !== 'host-redundant' || row.state === 'failed') return;
        const instances = await instancesOf(ctx.db, row.id);
        const primary = instances.find((i) => i.role === 'primary');
        if (!primary) return;
        let standby = instances.find((i) => i.role === 'standby');
        if (!standby) {
          const id = newId('dbi');
          standby = await insertInstance(ctx.db, {
            id,
            databaseId: row.id,
            role: 'standby',
            volume: volumeFor(row.kind, id),
            internalPort: await ctx.databases.internalPort(),
          });
        }
        const primarySpec = await instanceSpec(ctx.db, ctx.box, row, primary);
        const standbySpec = await instanceSpec(ctx.db, ctx.box, row, standby);
        await ctx.databases.createStandby(row.id, row.kind, primarySpec, standbySpec);
      },
    }),
  ];
}
