/**
 * Database rows and how they read: the API record (never a URL or password), lookups
 * scoped by organization (another organization's database is simply not found), and
 * the engine's view of an instance. The connection URL is built here and nowhere else.
 */
import type { Selectable } from 'kysely';
import { notFound } from '../../errors/api-error.js';
import type { InstanceSpec } from '../../engines/engine.js';
import type { SecretBox } from '../../crypto/secret-box.js';
import { MACHINE_CA_PATH } from '../../crypto/ca.js';
import { urlHost, type Config } from '../../config.js';
import type { Executor } from '../../store/db.js';
import type {
  DatabaseInstancesTable,
  DatabasesTable,
  SuspendPolicyRow,
} from '../../store/schema.js';
import type { DatabaseRecord } from '../../contracts/databases.js';

export type DatabaseRow = Selectable<DatabasesTable>;
export type InstanceRow = Selectable<DatabaseInstancesTable>;

export const EPHEMERAL_NOTE =
  'Ephemeral branch: no archive of its own (it cannot be forked or restored to a past moment), and it is lost if its host fails.';

/** The managed secret an attached app receives. */
export function secretKeyOf(kind: DatabaseRow['kind']): string {
  return kind === 'postgres' ? 'DATABASE_URL' : 'REDIS_URL';
}

/** Fills in the spec defaults, so answers always carry mode and idleSeconds. */
export function normalizePolicy(p: {
  mode?: SuspendPolicyRow['mode'];
  idleSeconds?: number;
  stopAfterSeconds?: number;
}): SuspendPolicyRow {
  return {
    mode: p.mode ?? 'suspend',
    idleSeconds: p.idleSeconds ?? 300,
    ...(p.stopAfterSeconds !== undefined ? { stopAfterSeconds: p.stopAfterSeconds } : {}),
  };
}

export function toRecord(row: DatabaseRow, instances: InstanceRow[]): DatabaseRecord {
  const primary = instances.find((i) => i.role === 'primary');
  const standby = instances.find((i) => i.role === 'standby');
  const redundant = row.durability === 'host-redundant';
  return {
    name: row.name,
    orgId: row.org_id,
    kind: row.kind,
    port: row.port,
    secretKey: secretKeyOf(row.kind),
    durability: row.durability,
    ...(redundant && primary ? { primaryMachineId: primary.id } : {}),
    ...(redundant && standby ? { standbyMachineId: standby.id } : {}),
    createdAt: row.created_at.toISOString(),
    state: row.state,
    ...(row.state_reason ? { stateReason: row.state_reason } : {}),
    ...(row.source_name ? { sourceName: row.source_name } : {}),
    ...(row.source_as_of ? { sourceAsOf: row.source_as_of.toISOString() } : {}),
    ...(row.copy_kind ? { copyKind: row.copy_kind } : {}),
    ...(row.ephemeral ? { ephemeral: true as const, ephemeralNote: EPHEMERAL_NOTE } : {}),
    ...(row.suspend_policy ? { suspendPolicy: row.suspend_policy } : {}),
    ...(row.expires_at ? { expiresAt: row.expires_at.toISOString() } : {}),
    memoryMb: row.memory_mb,
    sizeGb: row.size_gb,
    persistent: row.persistent,
    ...(row.locale ? { locale: row.locale } : {}),
    host: row.host,
    power: row.power,
  };
}

/** The database of `orgId` named `name`, or 404 (also when another organization has it). */
export async function findDatabase(
  ex: Executor,
  orgId: string,
  name: string,
  opts: { lock?: boolean } = {},
): Promise<DatabaseRow> {
  let q = ex
    .selectFrom('databases')
    .selectAll()
    .where('org_id', '=', orgId)
    .where('name', '=', name);
  if (opts.lock) q = q.forUpdate();
  const row = await q.executeTakeFirst();
  if (!row) throw notFound(`Database '${name}'`);
  return row;
}

export async function instancesOf(ex: Executor, databaseId: string): Promise<InstanceRow[]> {
  return ex
    .selectFrom('database_instances')
    .selectAll()
    .where('database_id', '=', databaseId)
    .orderBy('role')
    .execute();
}

/** Instances of many databases at once, keyed by database id (for lists). */
export async function instancesByDatabase(
  ex: Executor,
  ids: string[],
): Promise<Map<string, InstanceRow[]>> {
  const out = new Map<string, InstanceRow[]>();
  if (ids.length === 0) return out;
  const rows = await ex
    .selectFrom('database_instances')
    .selectAll()
    .where('database_id', 'in', ids)
    .execute();
  for (const r of rows) out.set(r.database_id, [...(out.get(r.database_id) ?? []), r]);
  return out;
}

export function passwordOf(box: SecretBox, row: DatabaseRow): string {
  return box.open(
    { nonce: row.password_nonce, ciphertext: row.password_ciphertext },
    `database:${row.id}`,
  );
}

/** The engine's view of one instance of `row`. */
export async function instanceSpec(
  ex: Executor,
  box: SecretBox,
  row: DatabaseRow,
  inst: InstanceRow,
): Promise<InstanceSpec> {
  let archive: InstanceSpec['archive'];
  if (row.archive_id && inst.role === 'primary') {
    archive = { id: row.archive_id, sourceVolume: inst.volume };
  }
  return {
    id: inst.id,
    owner: row.id,
    volume: inst.volume,
    internalPort: inst.internal_port,
    memoryMb: row.memory_mb,
    sizeGb: row.size_gb,
    password: passwordOf(box, row),
    ...(archive ? { archive } : {}),
    ...(row.flush_interval_s ? { flushIntervalS: row.flush_interval_s } : {}),
  };
}

/** Inserts an instance row (a server of a database) inside the caller's transaction. */
export async function insertInstance(
  tx: Executor,
  i: {
    id: string;
    databaseId: string;
    role: InstanceRow['role'];
    volume: string;
    internalPort: number;
  },
): Promise<InstanceRow> {
  return tx
    .insertInto('database_instances')
    .values({
      id: i.id,
      database_id: i.databaseId,
      role: i.role,
      volume: i.volume,
      internal_port: i.internalPort,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** Inserts the row of a new archive, written by the instance in `sourceVolume`. */
export async function insertArchive(
  tx: Executor,
  a: {
    id: string;
    orgId: string;
    databaseId: string;
    kind: DatabaseRow['kind'];
    sourceVolume: string;
  },
): Promise<void> {
  await tx
    .insertInto('database_archives')
    .values({
      id: a.id,
      org_id: a.orgId,
      database_id: a.databaseId,
      kind: a.kind,
      source_volume: a.sourceVolume,
    })
    .execute();
}

/**
 * The connection URL a person gets (create, copy hand-out): TLS always (`sslmode=require`
 * for postgres, `rediss://` for redis), the customer's role `app`, the public host and
 * the front's port.
 */
export function connectionUrl(publicUrl: string, row: DatabaseRow, password: string): string {
  return urlOf(new URL(publicUrl).hostname, row, password, 'sslmode=require');
}

/**
 * The URL an attached app's machines get: the services host (the host's address on the
 * machines' network, or the operator's name for it), and for postgres a verified TLS
 * against the platform CA that every machine holds at MACHINE_CA_PATH.
 */
export function machineConnectionUrl(
  config: Pick<Config, 'servicesHost'>,
  row: DatabaseRow,
  password: string,
): string {
  return urlOf(
    urlHost(config.servicesHost),
    row,
    password,
    `sslmode=verify-full&sslrootcert=${MACHINE_CA_PATH}`,
  );
}

function urlOf(host: string, row: DatabaseRow, password: string, pgTls: string): string {
  const pw = encodeURIComponent(password);
  return row.kind === 'postgres'
    ? `postgresql://app:${pw}@${host}:${row.port}/app?${pgTls}`
    : `rediss://app:${pw}@${host}:${row.port}`;
}
