/**
 * The operator's limits on what an organization holds (CONTRACT 2, `PUT
 * /admin/v1/orgs/:id/limits`): managed databases, machines, total memory and reserved
 * storage. Every entrance that adds one of these calls `assertOrgRoom` inside the
 * transaction that inserts or grows the row: it locks the org row first, so concurrent
 * requests of one organization count one after the other and cannot both slip under a
 * limit (as app creates do). The same call with `lock: false`, before the transaction, is
 * the early answer that keeps a refused request from doing any host work (a database's
 * front, a volume's pool check, a machine's volume); the locked call decides.
 *
 * What counts:
 * - databases: every database row: creates, branches, forks and a restore's preserved
 *   copy. A deleted database has no row.
 * - machines: machines neither destroyed nor being destroyed. A deploy-style replace does
 *   not count the machine it replaces.
 * - memory (MB): those machines' `memoryMb`, plus each database's `memoryMb`, twice for a
 *   host-redundant one (its standby is a second server of the same size).
 * - storage (GB), reserved, not used: volumes' `sizeGb` plus databases' `sizeGb` (as
 *   resized), twice for a host-redundant database (the standby has its own volume). Bucket
 *   bytes are not counted: there is no per-bucket byte count to read cheaply, and summing
 *   objects on each PUT would slow every small write.
 */
import { sql } from 'kysely';
import { ApiError } from '../errors/api-error.js';
import type { ErrorCode } from '../errors/catalogue.js';
import type { Executor, Tx } from '../store/db.js';

/** What a request would add to the organization. */
export interface OrgAddition {
  databases?: number;
  machines?: number;
  memoryMb?: number;
  storageGb?: number;
  /** The machine a deploy-style replace takes the place of: it does not count. */
  replacing?: string;
}

/** The memory of a machine whose stored config has none (config-schema.ts's default). */
const MACHINE_DEFAULT_MEMORY_MB = 512;

/** A host-redundant database runs a standby of the same size beside its primary. */
const copies = sql<number>`CASE WHEN durability = 'host-redundant' THEN 2 ELSE 1 END`;

function liveMachines(ex: Executor, orgId: string, replacing?: string) {
  let q = ex
    .selectFrom('machines')
    .where('org_id', '=', orgId)
    .where('observed_state', '<>', 'deleted')
    .where('desired_state', '<>', 'deleted');
  if (replacing !== undefined) q = q.where('id', '<>', replacing);
  return q;
}

async function countDatabases(ex: Executor, orgId: string): Promise<number> {
  const { n } = await ex
    .selectFrom('databases')
    .select((eb) => eb.fn.countAll<string>().as('n'))
    .where('org_id', '=', orgId)
    .executeTakeFirstOrThrow();
  return Number(n);
}

async function countMachines(ex: Executor, orgId: string, replacing?: string): Promise<number> {
  const { n } = await liveMachines(ex, orgId, replacing)
    .select((eb) => eb.fn.countAll<string>().as('n'))
    .executeTakeFirstOrThrow();
  return Number(n);
}

/** MB of memory the organization's machines and databases hold now. */
export async function memoryInUse(ex: Executor, orgId: string, replacing?: string) {
  const machines = await liveMachines(ex, orgId, replacing)
    .select(
      sql<string>`COALESCE(SUM(COALESCE((config->>'memoryMb')::integer, ${MACHINE_DEFAULT_MEMORY_MB})), 0)`.as(
        'mb',
      ),
    )
    .executeTakeFirstOrThrow();
  const databases = await ex
    .selectFrom('databases')
    .select(sql<string>`COALESCE(SUM(memory_mb * ${copies}), 0)`.as('mb'))
    .where('org_id', '=', orgId)
    .executeTakeFirstOrThrow();
  return Number(machines.mb) + Number(databases.mb);
}

/** GB of storage the organization's volumes and databases reserve now. */
export async function storageInUse(ex: Executor, orgId: string) {
  const volumes = await ex
    .selectFrom('volumes')
    .select(sql<string>`COALESCE(SUM(size_gb), 0)`.as('gb'))
    .where('org_id', '=', orgId)
    .executeTakeFirstOrThrow();
  const databases = await ex
    .selectFrom('databases')
    .select(sql<string>`COALESCE(SUM(size_gb * ${copies}), 0)`.as('gb'))
    .where('org_id', '=', orgId)
    .executeTakeFirstOrThrow();
  return Number(volumes.gb) + Number(databases.gb);
}

const plural = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`;

/**
 * Locks the organization's row until the transaction ends: requests that add to it wait
 * for each other here. FOR NO KEY UPDATE: rows inserted elsewhere that merely reference
 * the organization (a key share lock) do not wait.
 */
export async function lockOrg(tx: Tx, orgId: string): Promise<void> {
  await tx.selectFrom('orgs').select('id').where('id', '=', orgId).forNoKeyUpdate().execute();
}

/** One operator limit: its column, what a request adds, how to count, how to refuse. */
interface OrgLimit {
  column: 'limit_databases' | 'limit_machines' | 'limit_memory_mb' | 'limit_storage_gb';
  adds: 'databases' | 'machines' | 'memoryMb' | 'storageGb';
  code: ErrorCode;
  current(ex: Executor, orgId: string, add: OrgAddition): Promise<number>;
  message(current: number, limit: number, adding: number): string;
}

const LIMITS: readonly OrgLimit[] = [
  {
    column: 'limit_databases',
    adds: 'databases',
    code: 'org-limit-databases',
    current: (ex, orgId) => countDatabases(ex, orgId),
    message: (current, limit) =>
      `The organization has ${plural(current, 'database', 'databases')}, as many as allowed (${limit}).`,
  },
  {
    column: 'limit_machines',
    adds: 'machines',
    code: 'org-limit-machines',
    current: (ex, orgId, add) => countMachines(ex, orgId, add.replacing),
    message: (current, limit) =>
      `The organization has ${plural(current, 'machine', 'machines')}, as many as allowed (${limit}).`,
  },
  {
    column: 'limit_memory_mb',
    adds: 'memoryMb',
    code: 'org-limit-memory',
    current: (ex, orgId, add) => memoryInUse(ex, orgId, add.replacing),
    message: (current, limit, adding) =>
      `The organization's machines and databases hold ${current} MB of memory of the ${limit} MB allowed; this request would add ${adding} MB.`,
  },
  {
    column: 'limit_storage_gb',
    adds: 'storageGb',
    code: 'org-limit-storage',
    current: (ex, orgId) => storageInUse(ex, orgId),
    message: (current, limit, adding) =>
      `The organization's volumes and databases reserve ${current} GB of storage of the ${limit} GB allowed; this request would add ${adding} GB.`,
  },
];

/**
 * Refuses with 403 (`org-limit-databases`, `-machines`, `-memory`, `-storage`, with `limit`
 * and `current`) when adding `add` would take the organization past one of its limits.
 * With `lock` (the default) it locks the org row: call it inside the transaction that
 * inserts, before the insert. Only the quantities the request adds and the organization
 * limits are counted, so an unlimited organization pays one indexed read.
 */
export async function assertOrgRoom(
  ex: Executor,
  orgId: string,
  add: OrgAddition,
  opts: { lock?: boolean } = {},
): Promise<void> {
  let q = ex
    .selectFrom('orgs')
    .select(['limit_databases', 'limit_machines', 'limit_memory_mb', 'limit_storage_gb'])
    .where('id', '=', orgId);
  // The lock of lockOrg, taken with the read.
  if (opts.lock !== false) q = q.forNoKeyUpdate();
  const org = await q.executeTakeFirstOrThrow();

  for (const l of LIMITS) {
    const limit = org[l.column];
    const adding = add[l.adds] ?? 0;
    if (limit === null || adding <= 0) continue;
    const current = await l.current(ex, orgId, add);
    if (current + adding > limit) {
      throw new ApiError(l.code, l.message(current, limit, adding), { limit, current });
    }
  }
}
