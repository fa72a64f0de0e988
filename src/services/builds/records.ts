/**
 * Rows of sources and builds, and where their bytes live on this host: the archive at
 * `DATA_DIR/builds/sources/<id>.tar.gz`, the builder's output at
 * `DATA_DIR/builds/logs/<id>.log`. Every lookup takes the caller's organization, so
 * another organization's build is simply not found.
 */
import path from 'node:path';
import type { Build, BuilderKind, Source } from '../../contracts/builds.js';
import { ApiError } from '../../errors/api-error.js';
import type { Executor } from '../../store/db.js';
import type { ServiceContext } from '../context.js';

export function sourcesDir(ctx: ServiceContext): string {
  return path.join(ctx.config.dataDir, 'builds', 'sources');
}

export function sourceFile(ctx: ServiceContext, id: string): string {
  return path.join(sourcesDir(ctx), `${id}.tar.gz`);
}

export function logsDir(ctx: ServiceContext): string {
  return path.join(ctx.config.dataDir, 'builds', 'logs');
}

export function buildLogFile(ctx: ServiceContext, id: string): string {
  return path.join(logsDir(ctx), `${id}.log`);
}

export interface SourceRow {
  id: string;
  app_id: string;
  size_bytes: string;
  sha256: string;
  files: number;
  created_at: Date;
}

export function toSource(r: SourceRow, app: string): Source {
  return {
    id: r.id,
    app,
    sizeBytes: Number(r.size_bytes),
    sha256: r.sha256,
    files: r.files,
    createdAt: r.created_at.toISOString(),
  };
}

/** The source `id` of the app, or 404 `not-found`. */
export async function findSource(ex: Executor, appId: string, id: string): Promise<SourceRow> {
  const row = await ex
    .selectFrom('build_sources')
    .select(['id', 'app_id', 'size_bytes', 'sha256', 'files', 'created_at'])
    .where('id', '=', id)
    .where('app_id', '=', appId)
    .executeTakeFirst();
  if (!row) throw new ApiError('not-found', `The app has no source '${id}'.`);
  return row;
}

export function buildsQuery(ex: Executor) {
  return ex
    .selectFrom('builds')
    .innerJoin('apps', 'apps.id', 'builds.app_id')
    .select([
      'builds.id',
      'builds.org_id',
      'builds.app_id',
      'apps.name as app_name',
      'builds.source_id',
      'builds.dockerfile',
      'builds.state',
      'builds.builder',
      'builds.image_digest',
      'builds.start_command',
      'builds.internal_port',
      'builds.error',
      'builds.created_at',
      'builds.started_at',
      'builds.finished_at',
    ]);
}

export type BuildRow = Awaited<
  ReturnType<ReturnType<typeof buildsQuery>['executeTakeFirstOrThrow']>
>;

export function toBuild(r: BuildRow): Build {
  return {
    id: r.id,
    app: r.app_name,
    source: r.source_id,
    state: r.state,
    ...(r.builder ? { builder: r.builder as BuilderKind } : {}),
    ...(r.start_command ? { startCommand: r.start_command } : {}),
    ...(r.internal_port !== null ? { internalPort: r.internal_port } : {}),
    createdAt: r.created_at.toISOString(),
    ...(r.started_at ? { startedAt: r.started_at.toISOString() } : {}),
    ...(r.finished_at ? { finishedAt: r.finished_at.toISOString() } : {}),
    ...(r.image_digest ? { imageDigest: r.image_digest } : {}),
    ...(r.error ? { error: r.error } : {}),
  };
}

/** The build `id` of the organization, or 404 `build-not-found`. */
export async function findBuild(ex: Executor, orgId: string, id: string): Promise<BuildRow> {
  const row = await buildsQuery(ex)
    .where('builds.id', '=', id)
    .where('builds.org_id', '=', orgId)
    .executeTakeFirst();
  if (!row) throw new ApiError('build-not-found', `No build '${id}' in the organization.`);
  return row;
}

/**
 * What `build:<id>` runs: a reference the image store holds by digest (so it is never
 * looked up in a registry while the image is kept), for a finished build of `orgId`.
 */
export async function buildImageRef(ex: Executor, orgId: string, id: string): Promise<string> {
  const row = await findBuild(ex, orgId, id);
  if (row.state !== 'done' || !row.image_digest) {
    throw new ApiError(
      'build-not-ready',
      `The build '${id}' is ${row.state}${row.error ? `: ${row.error}` : ''}; it has no image.`,
    );
  }
  // `.invalid` can never resolve: were the store to lose the image, the pull fails closed.
  return `build.pier.invalid/${row.org_id.toLowerCase()}/${row.id}@${row.image_digest}`;
}
