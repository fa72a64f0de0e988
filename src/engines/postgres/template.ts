/**
 * Pre-initialized data directories, one per (major version, locale), kept as pool
 * volumes: a new database is a snapshot of one, never an initdb of its own. A template is
 * built under a temporary name and published by snapshotting it to its final name, so it
 * appears complete or not at all; a build a crash interrupted is destroyed and redone.
 */
import { mkdir, readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import type { EngineEnv } from '../engine.js';
import { EngineError } from '../engine.js';
import { newestBinaries, type PgBinaries } from './binaries.js';
import { writeServerFiles } from './configure.js';
import { run } from './exec.js';
import { ownDir } from './files.js';
import { discardVolume, persistCopy } from './instance.js';
import { ensurePrivateDir, layoutOf, type Layout } from './layout.js';
import { KnownLocales, unknownLocale } from './locale.js';
import { halt, launch } from './process.js';
import { APP_ROLE, renderSettings, SUPERUSER } from './settings.js';
import { withClient } from './sql.js';

/** The socket-only port of a template's build server (its socket dir is its own). */
const BUILD_PORT = 5432;

/**
 * Whether the customer role may get CREATEROLE. Before PostgreSQL 16, CREATEROLE may grant
 * any non-superuser role, pg_execute_server_program included, which runs shell commands as
 * the service user that runs every database on the host: so only from 16 on.
 */
export function appMayCreateRoles(major: number): boolean {
  return major >= 16;
}

/** The volume name of the template for `major` and a normalized `locale` (none: C.UTF-8). */
export function templateName(major: number, locale?: string): string {
  return locale ? `pgtpl${major}-icu-${locale.toLowerCase()}` : `pgtpl${major}-libc`;
}

/** Builds templates on first need, at most once at a time per template in this process. */
export class Templates {
  private readonly building = new Map<string, Promise<void>>();
  private readonly locales = new Map<string, KnownLocales>();
  private readonly swept = new Set<string>();

  constructor(private readonly binDir?: string) {}

  /** The template volume for `locale` (normalized), built first if needed. */
  async ensure(env: EngineEnv, locale?: string): Promise<string> {
    const bins = await newestBinaries(this.binDir);
    if (locale && bins.major < 15) {
      throw new EngineError('unsupported', `ICU locales need PostgreSQL 15 or newer.`);
    }
    const name = templateName(bins.major, locale);
    if (await env.pool.info(name)) {
      // A crash between publishing and removing the build left it behind: once per process.
      if (!this.swept.has(name) && !this.building.has(name)) {
        this.swept.add(name);
        await discardVolume(env, `${name}-build`);
      }
      return name;
    }
    const known = this.knownLocales(env);
    if (locale && (await known.has(bins.major, locale)) === false) throw unknownLocale(locale);
    let build = this.building.get(name);
    if (!build) {
      build = buildTemplate(env, bins, name, known, locale).finally(() =>
        this.building.delete(name),
      );
      this.building.set(name, build);
    }
    await build;
    return name;
  }

  private knownLocales(env: EngineEnv): KnownLocales {
    let known = this.locales.get(env.stateDir);
    if (!known) this.locales.set(env.stateDir, (known = new KnownLocales(env.stateDir)));
    return known;
  }
}

async function buildTemplate(
  callerEnv: EngineEnv,
  bins: PgBinaries,
  name: string,
  known: KnownLocales,
  locale?: string,
): Promise<void> {
  // Never a database's identity: every database to come is a copy of this volume, and a
  // server that could write it would reach into all of them.
  const env = { ...callerEnv, user: callerEnv.templateUser ?? callerEnv.user };
  const temp = `${name}-build`;
  await discardVolume(env, temp);
  const started = Date.now();
  const volume = await env.pool.create(temp, { owner: { uid: env.user.uid, gid: env.user.gid } });
  const layout = layoutOf(volume.path);
  try {
    await mkdir(layout.pgdata, { mode: 0o700 });
    await ownDir(env.user, layout.pgdata);
    const args = ['-D', layout.pgdata, '-U', SUPERUSER, '--auth=trust', '-E', 'UTF8'];
    args.push('--locale=C.UTF-8', '--data-checksums');
    if (locale) args.push('--locale-provider=icu', `--icu-locale=${locale}`);
    await run(env, path.join(bins.dir, 'initdb'), args);

    await ensurePrivateDir(env, layout.socketDir);
    const settings = renderSettings({
      id: name,
      port: BUILD_PORT,
      socketDir: layout.socketDir,
      listen: false,
      memoryMb: 256,
      sizeGb: 1,
      hotStandby: true,
    });
    await writeServerFiles(env, layout, settings);
    await launch(env, bins, layout, { timeoutMs: 120_000 });
    await populate(layout, bins, known, locale);
    await halt(layout.pgdata, 'fast');
    await tidy(layout);
    const published = await env.pool.snapshot(temp, name).catch(async (err: unknown) => {
      const other = await env.pool.info(name); // another process may have published it first
      if (!other) throw err;
      return other;
    });
    // Every database to come is copied from this one: it must be on disk, whole.
    await persistCopy(env, layoutOf(published.path), bins.dir);
    env.log.info({ template: name, ms: Date.now() - started }, 'postgres template built');
  } finally {
    await discardVolume(env, temp).catch((err: Error) =>
      env.log.warn({ volume: temp, err: err.message }, 'could not remove a template build'),
    );
  }
}

/** Checks the locale against the server's ICU, and makes the customer's role and database. */
async function populate(
  layout: Layout,
  bins: PgBinaries,
  known: KnownLocales,
  locale?: string,
): Promise<void> {
  await withClient(layout, BUILD_PORT, async (c) => {
    // PostgreSQL 17 renamed colliculocale to colllocale.
    const { rows } = await c.query<Record<string, string | null>>(
      `SELECT * FROM pg_collation WHERE collprovider = 'i'`,
    );
    const icu = rows.map((r) => r.colllocale ?? r.colliculocale).filter((l): l is string => !!l);
    await known.learn(bins.major, icu);
    if (locale && !icu.some((l) => l.toLowerCase() === locale.toLowerCase())) {
      throw unknownLocale(locale);
    }
    const createRole = appMayCreateRoles(bins.major) ? ' CREATEROLE' : '';
    await c.query(`CREATE ROLE ${APP_ROLE} LOGIN CREATEDB${createRole}`);
    await c.query(`CREATE DATABASE ${APP_ROLE} OWNER ${APP_ROLE}`);
  });
  await withClient(
    layout,
    BUILD_PORT,
    (c) => c.query(`ALTER SCHEMA public OWNER TO ${APP_ROLE}`),
    APP_ROLE,
  );
}

/** Removes what only the build server needed: its log, options file and socket leftovers. */
async function tidy(layout: Layout): Promise<void> {
  await rm(layout.logFile, { force: true });
  await rm(path.join(layout.pgdata, 'postmaster.opts'), { force: true });
  for (const entry of await readdir(layout.socketDir).catch(() => [])) {
    await rm(path.join(layout.socketDir, entry), { force: true });
  }
}
