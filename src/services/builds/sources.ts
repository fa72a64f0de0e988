/**
 * Source uploads (CONTRACT 7 `POST /v1/apps/:name/sources`): the request body, a gzip'd
 * tar, streamed to disk (never held in memory) under the operator's size cap, hashed on
 * the way, then checked entry by entry (runtime/builds/source-archive.ts) before its row
 * exists. A refused upload leaves nothing behind.
 */
import { createHash } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, rename, rm } from 'node:fs/promises';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Source } from '../../contracts/builds.js';
import { newId } from '../../crypto/tokens.js';
import { ApiError } from '../../errors/api-error.js';
import { checkSourceArchive, SourceArchiveError } from '../../runtime/builds/source-archive.js';
import { findApp } from '../apps/records.js';
import type { ServiceContext } from '../context.js';
import { sourceFile, sourcesDir, toSource } from './records.js';

const MIB = 1024 * 1024;

/** How much an archive may unpack to, as a multiple of its size cap (against zip bombs). */
const UNPACK_FACTOR = 10;

function tooLarge(message: string, limit: number): ApiError {
  return new ApiError('too-large', message, { limit });
}

export async function uploadSource(
  ctx: ServiceContext,
  orgId: string,
  appName: string,
  body: Readable,
  declaredLength: number | undefined,
): Promise<Source> {
  const app = await findApp(ctx.db, orgId, appName);
  const cap = Math.floor(ctx.config.buildSourceMaxMb * MIB);
  if (declaredLength !== undefined && declaredLength > cap) {
    body.resume();
    throw tooLarge(`A source archive may be at most ${cap} bytes.`, cap);
  }
  const id = newId('src');
  await mkdir(sourcesDir(ctx), { recursive: true, mode: 0o700 });
  const final = sourceFile(ctx, id);
  const tmp = `${final}.part`;
  const hash = createHash('sha256');
  let size = 0;
  const counter = new Transform({
    transform(chunk: Buffer, _enc, done) {
      size += chunk.length;
      if (size > cap) return done(tooLarge(`A source archive may be at most ${cap} bytes.`, cap));
      hash.update(chunk);
      done(null, chunk);
    },
  });
  try {
    await pipeline(body, counter, createWriteStream(tmp, { flags: 'wx', mode: 0o600 }));
    const files = await checkSourceArchive(tmp, {
      maxFiles: ctx.config.buildSourceMaxFiles,
      maxUnpackedBytes: cap * UNPACK_FACTOR,
    }).catch((err: unknown) => {
      if (!(err instanceof SourceArchiveError)) throw err;
      if (err.code === 'too-large') throw tooLarge(err.message, cap);
      throw new ApiError('bad-request', err.message, {
        issues: [{ path: err.entry ?? '', message: err.message }],
        ...(err.entry !== undefined ? { entry: err.entry } : {}),
      });
    });
    await rename(tmp, final);
    const row = await ctx.db
      .insertInto('build_sources')
      .values({
        id,
        org_id: orgId,
        app_id: app.id,
        size_bytes: size,
        sha256: hash.digest('hex'),
        files,
        created_at: ctx.clock(),
      })
      .returning(['id', 'app_id', 'size_bytes', 'sha256', 'files', 'created_at'])
      .executeTakeFirstOrThrow()
      .catch(async (err: unknown) => {
        await rm(final, { force: true });
        throw err;
      });
    return toSource(row, app.name);
  } catch (err) {
    body.resume(); // a refused body is drained, so the client reads the answer
    throw err;
  } finally {
    await rm(tmp, { force: true });
  }
}
