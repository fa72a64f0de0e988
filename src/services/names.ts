/**
 * The platform-wide namespace shared by apps, databases, volumes and buckets. A name is
 * claimed by inserting its row inside the transaction that creates the resource, so two
 * concurrent creates of one name cannot both win, whatever their organizations.
 */
import { NAME_PATTERN } from '../contracts/common.js';
import { ApiError } from '../errors/api-error.js';
import type { Executor } from '../store/db.js';

export type NameKind = 'app' | 'database' | 'volume' | 'bucket';

// Names that would collide with the platform's own addresses or confuse people.
const RESERVED = new Set([
  'api',
  'console',
  'docs',
  'www',
  'pier',
  'admin',
  'app',
  'apps',
  'auth',
  'billing',
  'dashboard',
  'help',
  'internal',
  'localhost',
  'login',
  'mail',
  'mcp',
  'oauth',
  'proxy',
  'registry',
  's3',
  'ssh',
  'static',
  'status',
  'support',
  'system',
  'root',
  'objects',
]);

export function isReserved(name: string): boolean {
  return RESERVED.has(name) || name.startsWith('pier-');
}

/** Why a name cannot be had, from the point of view of `orgId` (for availability answers). */
export async function nameAvailability(
  ex: Executor,
  orgId: string,
  name: string,
): Promise<'taken' | 'taken-by-you' | 'reserved' | 'invalid' | undefined> {
  if (!NAME_PATTERN.test(name)) return 'invalid';
  if (isReserved(name)) return 'reserved';
  const row = await ex
    .selectFrom('names')
    .select('org_id')
    .where('name', '=', name)
    .executeTakeFirst();
  if (!row) return undefined;
  return row.org_id === orgId ? 'taken-by-you' : 'taken';
}

/** Claims `name` for a new resource inside the caller's transaction. */
export async function claimName(
  ex: Executor,
  orgId: string,
  name: string,
  kind: NameKind,
): Promise<void> {
  if (isReserved(name)) {
    throw new ApiError('name-reserved', `The name '${name}' is reserved by the platform.`);
  }
  const inserted = await ex
    .insertInto('names')
    .values({ name, kind, org_id: orgId })
    .onConflict((oc) => oc.column('name').doNothing())
    .returning('name')
    .executeTakeFirst();
  if (!inserted) {
    throw new ApiError('name-taken', `The name '${name}' is already used on the platform.`);
  }
}

export async function releaseName(ex: Executor, orgId: string, name: string): Promise<void> {
  await ex.deleteFrom('names').where('name', '=', name).where('org_id', '=', orgId).execute();
}
