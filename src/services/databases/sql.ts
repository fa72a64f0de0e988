/**
 * One SQL statement on a managed PostgreSQL database (`POST /v1/resources/:name/sql`).
 * A statement runs as the database's own role `app` (what its URL gives a person), a
 * read-only one as the SQL reader (a role that can read and nothing else), over the same
 * path a client takes: the database's front, which wakes a suspended or stopped database
 * on connect, and TLS verified against the platform CA. One connection per statement,
 * closed after it: no session state outlives the call.
 *
 * Bounds: the extended protocol always (one statement, never a `COMMIT; …` chain), a
 * statement timeout, a row cap and a byte cap on what is kept (the rest is read and
 * dropped, so a write's RETURNING still commits whole). Read-only runs in `BEGIN READ
 * ONLY`, with read-only as the session default too, and ends with ROLLBACK.
 */
import pg from 'pg';
import { ApiError } from '../../errors/api-error.js';
import { SQL_BOUNDS, type SqlBody, type SqlResult } from '../../contracts/database-sql.js';
import type { Executor } from '../../store/db.js';
import type { ServiceContext } from '../context.js';
import { SQL_READER_ROLE } from '../../engines/postgres/settings.js';
import { sqlReaderPassword } from '../../engines/postgres/sql.js';
import {
  findDatabase,
  instanceSpec,
  instancesOf,
  passwordOf,
  type DatabaseRow,
} from './records.js';
import { frontHostOf } from './tunnels.js';

/** Limits of the runner; a test may lower them (the object is read at each use). */
export const SQL_LIMITS = {
  /** Bytes of row values kept in one answer; past them the answer is truncated. */
  maxResultBytes: 4 * 1024 * 1024,
  /** Connecting, including waking the database through its front. */
  connectTimeoutMs: 30_000,
};

/** Login refused: no such role or no pg_hba line for it (28000), wrong password (28P01). */
const LOGIN_REFUSED_SQLSTATES = new Set(['28000', '28P01']);

/** SQLSTATEs with their own code: read-only write, statement timeout (query_canceled). */
const READ_ONLY_SQLSTATE = '25006';
const CANCELED_SQLSTATE = '57014';

/** Every value as PostgreSQL prints it: lossless, and the same for every type. */
const TEXT_TYPES = { getTypeParser: () => (value: string) => value };

/**
 * The names of the apps `name` is attached to, the caller's own first: what an agent
 * token limited to some apps is judged against (a database attached to one of its apps
 * is that app's data).
 */
export async function appsOfDatabase(ex: Executor, orgId: string, name: string) {
  const rows = await ex
    .selectFrom('databases')
    .innerJoin('database_attachments', 'database_attachments.database_id', 'databases.id')
    .innerJoin('apps', 'apps.id', 'database_attachments.app_id')
    .select('apps.name')
    .where('databases.org_id', '=', orgId)
    .where('databases.name', '=', name)
    .orderBy('apps.name')
    .execute();
  return rows.map((r) => r.name);
}

export async function runSql(
  ctx: ServiceContext,
  orgId: string,
  name: string,
  body: SqlBody,
  readOnly: boolean,
): Promise<SqlResult> {
  const row = await findDatabase(ctx.db, orgId, name);
  if (row.kind !== 'postgres') {
    throw new ApiError(
      'sql-postgres-only',
      `Database '${name}' is ${row.kind}: SQL runs on PostgreSQL databases only.`,
    );
  }
  if (row.state !== 'ready') {
    throw new ApiError('not-ready', `Database '${name}' is ${row.state}: it runs no SQL now.`);
  }
  const timeoutMs = body.timeoutMs ?? SQL_BOUNDS.defaultTimeoutMs;
  let client: pg.Client;
  try {
    client = await connect(ctx, row, readOnly, timeoutMs);
  } catch (err) {
    // A database made before the reader role: made now, then the login is tried again.
    if (!readOnly || !LOGIN_REFUSED_SQLSTATES.has((err as pg.DatabaseError).code ?? ''))
      throw unreachable(name, err);
    await prepareReader(ctx, row).catch((failed: unknown) => {
      throw failed instanceof ApiError ? failed : unreachable(name, failed);
    });
    client = await connect(ctx, row, readOnly, timeoutMs).catch((again: unknown) => {
      throw unreachable(name, again);
    });
  }
  try {
    if (readOnly) await client.query('BEGIN READ ONLY');
    const { fields, ...result } = await statement(
      client,
      body,
      body.maxRows ?? SQL_BOUNDS.defaultMaxRows,
    );
    if (readOnly) await client.query('ROLLBACK');
    return { ...result, columns: await typed(client, fields), readOnly };
  } catch (err) {
    throw sqlFailure(err, timeoutMs);
  } finally {
    await client.end().catch(() => undefined);
  }
}

/**
 * A connection for one statement: as `app`, or for a read-only run as the SQL reader,
 * which can read every table and do nothing else (settings.ts SQL_READER_ROLE): inside
 * `BEGIN READ ONLY` the owner could still end other sessions of its own role.
 */
async function connect(
  ctx: ServiceContext,
  row: DatabaseRow,
  readOnly: boolean,
  timeoutMs: number,
): Promise<pg.Client> {
  const password = passwordOf(ctx.box, row);
  const client = new pg.Client({
    host: frontHostOf(row.host),
    port: row.port,
    user: readOnly ? SQL_READER_ROLE : 'app',
    password: readOnly ? sqlReaderPassword(password) : password,
    database: 'app',
    ssl: { ca: await ctx.databases.caCertificate(), servername: 'localhost' },
    application_name: 'pier-sql',
    connectionTimeoutMillis: SQL_LIMITS.connectTimeoutMs,
    // The server's own timeout (pg's client-side query_timeout would swallow the
    // statement's events: it replaces the query's callback).
    statement_timeout: timeoutMs,
    ...(readOnly ? { options: '-c default_transaction_read_only=on' } : {}),
    types: TEXT_TYPES,
  });
  // An error after connect (the server going away) must not become an uncaught exception.
  client.on('error', () => undefined);
  try {
    await client.connect();
    return client;
  } catch (err) {
    await client.end().catch(() => undefined);
    throw err;
  }
}

/** Makes the SQL reader on the database's primary (databases older than the role). */
async function prepareReader(ctx: ServiceContext, row: DatabaseRow): Promise<void> {
  const primary = (await instancesOf(ctx.db, row.id)).find((i) => i.role === 'primary');
  if (!primary) throw new ApiError('not-ready', `Database '${row.name}' has no server now.`);
  const spec = await instanceSpec(ctx.db, ctx.box, row, primary);
  await ctx.databases.prepareSqlReader(row.id, row.kind, spec);
}

function unreachable(name: string, err: unknown): ApiError {
  return new ApiError(
    'upstream-failed',
    `Database '${name}' did not accept a connection: ${(err as Error).message}`,
  );
}

interface Raw extends Omit<SqlResult, 'columns' | 'readOnly'> {
  fields: { name: string; dataTypeID: number }[];
}

/** Runs the statement, keeping at most `maxRows` rows and SQL_LIMITS.maxResultBytes. */
function statement(client: pg.Client, body: SqlBody, maxRows: number): Promise<Raw> {
  const rows: (string | null)[][] = [];
  let bytes = 0;
  let truncated = false;
  const config: pg.QueryArrayConfig & { queryMode: 'extended' } = {
    text: body.sql,
    values: body.params ?? [],
    rowMode: 'array',
    // Never the simple protocol: it would run `…; COMMIT; …` as several statements.
    queryMode: 'extended',
  };
  // The typings take only the object-row config; pg itself reads rowMode from either.
  const query = new pg.Query(config as unknown as pg.QueryConfig);
  query.on('row', (r: (string | null)[]) => {
    if (truncated) return;
    const size = r.reduce((n, v) => n + (v === null ? 4 : Buffer.byteLength(v) + 2), 2);
    if (rows.length >= maxRows || bytes + size > SQL_LIMITS.maxResultBytes) {
      truncated = true;
      return;
    }
    bytes += size;
    rows.push(r);
  });
  return new Promise((resolve, reject) => {
    query.on('error', reject);
    query.on('end', (res: pg.QueryResult) =>
      resolve({
        command: res.command ?? '',
        fields: res.fields ?? [],
        rows,
        rowCount: res.rowCount,
        truncated,
      }),
    );
    client.query(query);
  });
}

/** Column names with their type names (one catalogue read for the types present). */
async function typed(client: pg.Client, fields: Raw['fields']): Promise<SqlResult['columns']> {
  if (fields.length === 0) return [];
  const oids = [...new Set(fields.map((f) => f.dataTypeID))];
  const { rows } = await client.query<{ oid: string; name: string }>(
    'SELECT oid::text AS oid, format_type(oid, NULL) AS name FROM pg_type WHERE oid = ANY($1::oid[])',
    [oids],
  );
  const names = new Map(rows.map((r) => [Number(r.oid), r.name]));
  return fields.map((f) => ({
    name: f.name,
    type: names.get(f.dataTypeID) ?? String(f.dataTypeID),
  }));
}

/** PostgreSQL's refusal as pier's error: the message, SQLSTATE and position kept. */
function sqlFailure(err: unknown, timeoutMs: number): ApiError {
  if (err instanceof ApiError) return err;
  const e = err as pg.DatabaseError;
  if (typeof e.code !== 'string' || !/^[0-9A-Z]{5}$/.test(e.code)) {
    return new ApiError('upstream-failed', `The database failed: ${e.message}`);
  }
  const extra = {
    sqlstate: e.code,
    ...(e.position ? { position: Number(e.position) } : {}),
    ...(e.detail ? { detail: e.detail } : {}),
    ...(e.hint ? { hint: e.hint } : {}),
  };
  if (e.code === READ_ONLY_SQLSTATE) {
    return new ApiError(
      'read-only-transaction',
      `The statement writes, and it ran read-only (${e.message}).`,
      extra,
    );
  }
  if (e.code === CANCELED_SQLSTATE) {
    return new ApiError(
      'sql-timeout',
      `The statement ran longer than ${timeoutMs} ms and was canceled.`,
      extra,
    );
  }
  return new ApiError('sql-error', e.message, extra);
}
