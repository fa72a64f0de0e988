/**
 * Builds of an app (CONTRACT 7): the row and its `builds.run` job commit together; the
 * job (jobs.ts) runs the builder. Reads are scoped by organization; the logs are the
 * builder's output as it wrote it, followed until the build ends with `follow=1`.
 */
import { open, stat } from 'node:fs/promises';
import { Readable } from 'node:stream';
import type { Build } from '../../contracts/builds.js';
import { newId } from '../../crypto/tokens.js';
import { enqueue } from '../../jobs/queue.js';
import { findApp } from '../apps/records.js';
import type { ServiceContext } from '../context.js';
import { buildLogFile, buildsQuery, findBuild, findSource, toBuild } from './records.js';

export async function createBuild(
  ctx: ServiceContext,
  orgId: string,
  appName: string,
  body: { source: string; dockerfile?: string },
): Promise<Build> {
  const id = newId('bld');
  const row = await ctx.db.transaction().execute(async (tx) => {
    const app = await findApp(tx, orgId, appName);
    await findSource(tx, app.id, body.source);
    await tx
      .insertInto('builds')
      .values({
        id,
        org_id: orgId,
        app_id: app.id,
        source_id: body.source,
        dockerfile: body.dockerfile ?? null,
        state: 'queued',
        created_at: ctx.clock(),
      })
      .execute();
    await enqueue(tx, ctx.jobs, 'builds.run', { buildId: id });
    return findBuild(tx, orgId, id);
  });
  return toBuild(row);
}

export async function listBuilds(ctx: ServiceContext, orgId: string, appName: string) {
  const app = await findApp(ctx.db, orgId, appName);
  const rows = await buildsQuery(ctx.db)
    .where('builds.app_id', '=', app.id)
    .orderBy('builds.created_at', 'desc')
    .orderBy('builds.id', 'desc')
    .execute();
  return rows.map(toBuild);
}

export async function getBuild(ctx: ServiceContext, orgId: string, id: string) {
  return toBuild(await findBuild(ctx.db, orgId, id));
}

const FOLLOW_POLL_MS = 250;
const CHUNK = 64 * 1024;

/**
 * The build's log as a stream: what is written so far, and with `follow`, what is
 * appended until the build is done or failed (then the rest, and the end).
 */
export async function buildLogs(
  ctx: ServiceContext,
  orgId: string,
  id: string,
  follow: boolean,
  signal: AbortSignal,
): Promise<Readable> {
  await findBuild(ctx.db, orgId, id);
  const file = buildLogFile(ctx, id);
  const finished = async () => {
    const row = await findBuild(ctx.db, orgId, id);
    return row.state === 'done' || row.state === 'failed';
  };
  async function* chunks(): AsyncGenerator<Buffer> {
    let offset = 0;
    for (;;) {
      // Read the state first: a build that ended before this read has all its output on disk.
      const ended = !follow || (await finished());
      const size = (await stat(file).catch(() => undefined))?.size ?? 0;
      if (size > offset) {
        const fh = await open(file, 'r');
        try {
          while (offset < size) {
            const buf = Buffer.alloc(Math.min(CHUNK, size - offset));
            const { bytesRead } = await fh.read(buf, 0, buf.length, offset);
            if (bytesRead === 0) break;
            offset += bytesRead;
            yield buf.subarray(0, bytesRead);
          }
        } finally {
          await fh.close();
        }
      }
      if (ended || signal.aborted) return;
      await new Promise((r) => setTimeout(r, FOLLOW_POLL_MS));
    }
  }
  return Readable.from(chunks());
}
