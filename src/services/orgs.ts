/**
 * Organizations and their people, as the operator API manages them (CONTRACT 2):
 * creation (with the first admin and a full-access key), users, suspension, limits.
 */
import { sql } from 'kysely';
import type { CreateOrgBody, CreateUserBody, LimitsBody, Org, User } from '../contracts/orgs.js';
import { ApiError, notFound } from '../errors/api-error.js';
import { hashPassword } from '../crypto/password.js';
import { newId } from '../crypto/tokens.js';
import type { Executor, Tx } from '../store/db.js';
import type { ServiceContext } from './context.js';
import type { KeyRecord } from '../contracts/tokens.js';
import { mintKey } from './keys.js';
import { addLedgerEntry } from './ledger.js';
import { windowMsOf } from './billing/pricing.js';

type OrgRow = {
  id: string;
  name: string;
  region: string;
  prepaid: boolean;
  managed_by: string | null;
  suspended_at: Date | null;
  limit_apps: number | null;
  limit_computers: number | null;
  limit_databases: number | null;
  limit_machines: number | null;
  limit_memory_mb: number | null;
  limit_storage_gb: number | null;
  created_at: Date;
};

export function toOrg(r: OrgRow): Org {
  return {
    id: r.id,
    name: r.name,
    region: r.region,
    prepaid: r.prepaid,
    ...(r.managed_by ? { managedBy: r.managed_by } : {}),
    suspended: r.suspended_at !== null,
    ...(r.suspended_at ? { suspendedAt: r.suspended_at.toISOString() } : {}),
    limits: {
      apps: r.limit_apps,
      computers: r.limit_computers,
      databases: r.limit_databases,
      machines: r.limit_machines,
      memoryMb: r.limit_memory_mb,
      storageGb: r.limit_storage_gb,
    },
    createdAt: r.created_at.toISOString(),
  };
}

function toUser(r: {
  id: string;
  org_id: string;
  email: string;
  role: 'admin' | 'member';
  created_at: Date;
}): User {
  return {
    id: r.id,
    orgId: r.org_id,
    email: r.email,
    role: r.role,
    createdAt: r.created_at.toISOString(),
  };
}

export async function getOrg(ex: Executor, id: string): Promise<Org> {
  const row = await ex.selectFrom('orgs').selectAll().where('id', '=', id).executeTakeFirst();
  if (!row) throw notFound('Organization');
  return toOrg(row);
}

export async function listOrgs(ex: Executor): Promise<Org[]> {
  const rows = await ex.selectFrom('orgs').selectAll().orderBy('created_at').execute();
  return rows.map(toOrg);
}

function isUniqueViolation(err: unknown, constraint: string): boolean {
  const e = err as { code?: unknown; constraint?: unknown } | null;
  return e?.code === '23505' && e.constraint === constraint;
}

async function insertUser(
  tx: Tx,
  ctx: ServiceContext,
  orgId: string,
  body: CreateUserBody,
): Promise<{ user: User; token: KeyRecord & { token: string } }> {
  const taken = await tx
    .selectFrom('users')
    .select('id')
    .where((eb) => eb(eb.fn('lower', ['email']), '=', body.email.toLowerCase()))
    .executeTakeFirst();
  if (taken)
    throw new ApiError('already-exists', `A person with the email ${body.email} already exists.`);
  const now = ctx.clock();
  const row = await tx
    .insertInto('users')
    .values({
      id: newId('usr'),
      org_id: orgId,
      email: body.email,
      role: body.role,
      password_hash: body.password ? await hashPassword(body.password) : null,
      created_at: now,
    })
    .returningAll()
    .executeTakeFirstOrThrow()
    .catch((err: unknown) => {
      // A concurrent request took the email between the check above and this insert.
      if (isUniqueViolation(err, 'users_email')) {
        throw new ApiError(
          'already-exists',
          `A person with the email ${body.email} already exists.`,
        );
      }
      throw err;
    });
  const token = await mintKey(
    tx,
    now,
    { orgId, userId: row.id, expiresAt: null },
    { name: `${body.email} (operator)` },
  );
  return { user: toUser(row), token };
}

/** Creates an org, its first admin, that person's full-access key, and its credit account. */
export async function createOrg(ctx: ServiceContext, body: CreateOrgBody) {
  return ctx.db.transaction().execute(async (tx) => {
    if (body.managedBy) {
      const manager = await tx
        .selectFrom('orgs')
        .select('id')
        .where('id', '=', body.managedBy)
        .executeTakeFirst();
      if (!manager)
        throw new ApiError('bad-request', `managedBy: no organization '${body.managedBy}'.`, {
          issues: [{ path: 'managedBy', message: 'no such organization' }],
        });
    }
    const now = ctx.clock();
    const orgRow = await tx
      .insertInto('orgs')
      .values({
        id: newId('org'),
        name: body.name,
        region: body.region ?? ctx.config.region,
        prepaid: body.prepaid,
        managed_by: body.managedBy ?? null,
        created_at: now,
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    if (body.prepaid)
      await tx
        .insertInto('credit_accounts')
        .values({ org_id: orgRow.id, created_at: now })
        .execute();
    if (body.grantCents > 0) {
      await addLedgerEntry(tx, orgRow.id, {
        kind: 'grant',
        cents: body.grantCents,
        reference: 'operator',
        detail: 'initial grant',
        at: now,
        windowMs: windowMsOf(ctx),
      });
    }
    const slug =
      body.name
        .toLowerCase()
        .replace(/[^a-z0-9]+/g, '-')
        .replace(/^-|-$/g, '') || 'org';
    const { user, token } = await insertUser(tx, ctx, orgRow.id, {
      email: body.email ?? `admin+${orgRow.id}@${slug}.pier.invalid`,
      password: body.password,
      role: 'admin',
    });
    return { org: toOrg(orgRow), user, token: token.token, key: token };
  });
}

export async function createUser(ctx: ServiceContext, orgId: string, body: CreateUserBody) {
  const created = await ctx.db.transaction().execute(async (tx) => {
    await getOrg(tx, orgId);
    const { user, token } = await insertUser(tx, ctx, orgId, body);
    return { user, token: token.token, key: token };
  });
  await ctx.auth.keysChanged(orgId);
  return created;
}

export async function setSuspended(
  ctx: ServiceContext,
  orgId: string,
  suspended: boolean,
): Promise<Org> {
  const row = await ctx.db
    .updateTable('orgs')
    // Suspending a suspended org keeps the time it was first suspended.
    .set({ suspended_at: suspended ? sql<Date>`COALESCE(suspended_at, ${ctx.clock()})` : null })
    .where('id', '=', orgId)
    .returningAll()
    .executeTakeFirst();
  if (!row) throw notFound('Organization');
  await ctx.auth.orgChanged(orgId);
  return toOrg(row);
}

export async function setLimits(
  ctx: ServiceContext,
  orgId: string,
  body: LimitsBody,
): Promise<Org> {
  const changes = {
    ...(body.apps !== undefined ? { limit_apps: body.apps } : {}),
    ...(body.computers !== undefined ? { limit_computers: body.computers } : {}),
    ...(body.databases !== undefined ? { limit_databases: body.databases } : {}),
    ...(body.machines !== undefined ? { limit_machines: body.machines } : {}),
    ...(body.memoryMb !== undefined ? { limit_memory_mb: body.memoryMb } : {}),
    ...(body.storageGb !== undefined ? { limit_storage_gb: body.storageGb } : {}),
  };
  // An empty body changes nothing (an UPDATE without columns is not valid SQL).
  if (Object.keys(changes).length === 0) return getOrg(ctx.db, orgId);
  const row = await ctx.db
    .updateTable('orgs')
    .set(changes)
    .where('id', '=', orgId)
    .returningAll()
    .executeTakeFirst();
  if (!row) throw notFound('Organization');
  return toOrg(row);
}
