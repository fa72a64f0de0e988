/**
 * Database attachments (CONTRACT 3): the app gets the managed secret named by the
 * database's `secretKey` (`DATABASE_URL`, `REDIS_URL` for Redis) holding its URL as the
 * app's machines reach it (records.ts machineConnectionUrl). The
 * secret cannot be changed through the secrets routes; detach (or deleting either side)
 * removes it.
 */
import type { DatabaseAttachment } from '../../contracts/databases.js';
import { ApiError } from '../../errors/api-error.js';
import type { Db, Tx } from '../../store/db.js';
import { findApp, type AppRow } from '../apps/records.js';
import { insertManagedSecret } from '../secrets.js';
import {
  findDatabase,
  machineConnectionUrl,
  passwordOf,
  secretKeyOf,
  type DatabaseRow,
} from './records.js';
import type { DatabaseContext } from './work.js';

/**
 * The host ports of the fronts of the databases attached to app `appId`: what its
 * machines may connect to on the host (the machines' walls close every other port). Read
 * when a machine starts, as its `DATABASE_URL` is: an attach reaches running machines at
 * their next start.
 */
export async function attachedFrontPorts(db: Db | Tx, appId: string): Promise<number[]> {
  const rows = await db
    .selectFrom('database_attachments as a')
    .innerJoin('databases as d', 'd.id', 'a.database_id')
    .select('d.port')
    .where('a.app_id', '=', appId)
    .execute();
  return [...new Set(rows.map((r) => r.port))].sort((x, y) => x - y);
}

export async function attachDatabase(
  ctx: DatabaseContext,
  orgId: string,
  appName: string,
  databaseName: string,
): Promise<DatabaseAttachment> {
  return ctx.db.transaction().execute(async (tx) => {
    const app = await findApp(tx, orgId, appName, { lock: true });
    const db = await findDatabase(tx, orgId, databaseName);
    return attachDatabaseWithin(tx, ctx, app, db);
  });
}

/**
 * Attaches `db` to `app` inside the caller's transaction, which holds the app's row (an
 * attach, or a preview attaching its branch in place of the original).
 */
export async function attachDatabaseWithin(
  tx: Tx,
  ctx: DatabaseContext,
  app: AppRow,
  db: DatabaseRow,
): Promise<DatabaseAttachment> {
  const existing = await tx
    .selectFrom('database_attachments')
    .select('app_id')
    .where('app_id', '=', app.id)
    .where('database_id', '=', db.id)
    .executeTakeFirst();
  if (existing) {
    throw new ApiError(
      'already-attached',
      `The database '${db.name}' is already attached to '${app.name}'.`,
    );
  }
  const name = secretKeyOf(db.kind);
  const taken = await tx
    .selectFrom('secrets')
    .select('name')
    .where('app_id', '=', app.id)
    .where('name', '=', name)
    .executeTakeFirst();
  if (taken) {
    throw new ApiError(
      'conflict',
      `The app '${app.name}' already has ${name}; detach the other database or remove the secret first.`,
    );
  }
  // What the app's machines dial: the services host, TLS verified (not the public URL).
  const url = machineConnectionUrl(ctx.config, db, passwordOf(ctx.box, db));
  await insertManagedSecret(tx, ctx, app.id, name, url, 'resource-password');
  await tx
    .insertInto('database_attachments')
    .values({ app_id: app.id, database_id: db.id, secret_name: name, created_at: ctx.clock() })
    .execute();
  return { appName: app.name, databaseName: db.name, injected: [name] };
}

export async function detachDatabase(
  ctx: DatabaseContext,
  orgId: string,
  appName: string,
  databaseName: string,
): Promise<DatabaseAttachment> {
  return ctx.db.transaction().execute(async (tx) => {
    const app = await findApp(tx, orgId, appName, { lock: true });
    const db = await findDatabase(tx, orgId, databaseName);
    const row = await tx
      .deleteFrom('database_attachments')
      .where('app_id', '=', app.id)
      .where('database_id', '=', db.id)
      .returning('secret_name')
      .executeTakeFirst();
    if (!row) {
      throw new ApiError(
        'not-attached',
        `The database '${databaseName}' is not attached to '${appName}'.`,
      );
    }
    await tx
      .deleteFrom('secrets')
      .where('app_id', '=', app.id)
      .where('name', '=', row.secret_name)
      .execute();
    return { appName, databaseName, injected: [row.secret_name] };
  });
}

/** Removes every database attachment of an app and its managed secrets (app teardown). */
export async function detachAppDatabases(tx: Tx, appId: string): Promise<void> {
  const rows = await tx
    .deleteFrom('database_attachments')
    .where('app_id', '=', appId)
    .returning('secret_name')
    .execute();
  if (rows.length === 0) return;
  await tx
    .deleteFrom('secrets')
    .where('app_id', '=', appId)
    .where(
      'name',
      'in',
      rows.map((r) => r.secret_name),
    )
    .execute();
}
