/**
 * The durable job of a build: `builds.run` takes a queued build to `building`, runs the
 * builder, and records `done` with the image's digest or `failed` with why. A rerun
 * after a crash starts the build again from its source (the builder's work directory is
 * made anew; its layer cache makes the repeat quick). When a build ends, the app's
 * older builds and the sources no kept build uses are pruned (prune.ts).
 */
import { appendFile, mkdir } from 'node:fs/promises';
import { z } from 'zod';
import { ApiError } from '../../errors/api-error.js';
import { defineJob, exponentialBackoff } from '../../jobs/catalogue.js';
import { crashPoint } from '../../jobs/crash-points.js';
import { BuildFailure } from '../../runtime/builds/local-builder.js';
import type { ServiceContext } from '../context.js';
import { revealSecrets } from '../secrets.js';
import { detectArchive } from './detect.js';
import { pruneBuilds, removeBuildImages } from './prune.js';
import { buildLogFile, buildsQuery, logsDir, sourceFile } from './records.js';

export function buildJobs(get: () => ServiceContext) {
  return [
    defineJob({
      kind: 'builds.run',
      payload: z.object({ buildId: z.string() }),
      maxAttempts: 2,
      backoffMs: exponentialBackoff(2000),
      async run({ buildId }, job) {
        const ctx = get();
        const row = await buildsQuery(ctx.db).where('builds.id', '=', buildId).executeTakeFirst();
        if (!row || row.state === 'done' || row.state === 'failed') return;
        const finish = async (set: {
          state: 'done' | 'failed';
          image_digest?: string;
          internal_port?: number;
          error?: string;
        }) => {
          const [updated] = await ctx.db
            .updateTable('builds')
            .set({ ...set, finished_at: new Date() })
            .where('id', '=', buildId)
            .execute();
          // The app was deleted while it built: what it made goes with it.
          if (!updated?.numUpdatedRows) {
            await removeBuildImages(ctx, [set.image_digest ?? null]);
            return;
          }
          await pruneBuilds(ctx, row.app_id).catch((err: unknown) =>
            ctx.log.warn({ err, app: row.app_id }, 'builds: prune failed'),
          );
        };
        await mkdir(logsDir(ctx), { recursive: true, mode: 0o700 });
        const logFile = buildLogFile(ctx, buildId);
        await ctx.db
          .updateTable('builds')
          .set({ state: 'building', started_at: new Date() })
          .where('id', '=', buildId)
          .execute();
        await appendFile(logFile, `pier: build ${buildId} (try ${job.attempt})\n`, { mode: 0o600 });
        try {
          if (!ctx.builder) throw new BuildFailure('This installation builds no images.');
          const source = sourceFile(ctx, row.source_id);
          const found = await detectArchive(
            source,
            ctx.config.detectImages,
            row.dockerfile ?? undefined,
          );
          await ctx.db
            .updateTable('builds')
            .set({
              builder: found.builder,
              start_command: found.startCommand ?? null,
              internal_port: found.internalPort ?? null,
            })
            .where('id', '=', buildId)
            .execute();
          if (found.dockerfile)
            await appendFile(
              logFile,
              `pier: detected ${found.builder}; Dockerfile:\n${found.dockerfile}`,
            );
          const { digest } = await ctx.builder.build({
            id: buildId,
            cache: row.app_id,
            source,
            dockerfile: found.dockerfile
              ? { text: found.dockerfile }
              : { path: row.dockerfile ?? 'Dockerfile' },
            secrets: await revealSecrets(ctx.db, ctx, row.app_id, { buildOnly: true }),
            logFile,
            signal: job.signal,
            building: () => crashPoint('builds.run', 'building', job.attempt),
          });
          // A Dockerfile's EXPOSE names the port when detect found none (as `fly launch` reads it).
          const exposed =
            found.internalPort === undefined
              ? (await ctx.images?.get(digest))?.config.exposedPorts?.[0]
              : undefined;
          await finish({
            state: 'done',
            image_digest: digest,
            ...(exposed ? { internal_port: exposed } : {}),
          });
        } catch (err) {
          // Interrupted by shutdown: the next try builds again.
          if (job.signal.aborted) throw err;
          const message =
            err instanceof BuildFailure || err instanceof ApiError
              ? err.message
              : `The build failed on the host: ${(err as Error).message}`;
          if (!(err instanceof BuildFailure)) ctx.log.warn({ err, buildId }, 'build failed');
          await appendFile(logFile, `pier: failed: ${message}\n`).catch(() => undefined);
          await finish({ state: 'failed', error: message.slice(0, 2000) });
        }
      },
    }),
  ];
}
