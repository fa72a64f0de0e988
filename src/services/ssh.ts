/**
 * SSH access (spec 4.1): the organization's public keys, short-lived SSH tokens for one
 * app (or one machine of it), and the gateway's address and host key.
 */
import type { AddSshKeyBody, CreateSshTokenBody } from '../contracts/ssh.js';
import { ApiError, badRequest, notFound } from '../errors/api-error.js';
import { mintSecret, newId } from '../crypto/tokens.js';
import { SshKeyError, parseSshPublicKey } from '../ssh/public-key.js';
import { findApp } from './apps/records.js';
import type { ServiceContext } from './context.js';

/** Keys per organization: enough for a team, small enough to keep the gateway's lookups cheap. */
export const SSH_KEY_LIMIT = 100;
export const DEFAULT_SSH_TOKEN_TTL_S = 3600;

export interface SshGateway {
  address: string;
  hostKey: string;
  fingerprint: string;
}

type KeyRow = {
  id: string;
  name: string;
  type: string;
  bits: number;
  fingerprint: string;
  public_key: string;
  user_id: string | null;
  created_at: Date;
};

function toKey(r: KeyRow) {
  return {
    id: r.id,
    name: r.name,
    type: r.type,
    bits: r.bits,
    fingerprint: r.fingerprint,
    publicKey: r.public_key,
    ...(r.user_id ? { userId: r.user_id } : {}),
    createdAt: r.created_at.toISOString(),
  };
}

export async function listSshKeys(ctx: ServiceContext, orgId: string) {
  const rows = await ctx.db
    .selectFrom('ssh_keys')
    .selectAll()
    .where('org_id', '=', orgId)
    .orderBy('created_at')
    .execute();
  return rows.map(toKey);
}

export async function addSshKey(
  ctx: ServiceContext,
  orgId: string,
  userId: string | null,
  body: AddSshKeyBody,
) {
  let parsed;
  try {
    parsed = parseSshPublicKey(body.publicKey);
  } catch (err) {
    if (err instanceof SshKeyError)
      throw new ApiError('invalid-key', err.message, {
        issues: [{ path: 'publicKey', message: err.message }],
      });
    throw err;
  }
  return ctx.db.transaction().execute(async (tx) => {
    // The org row lock serializes adds, so the limit and the duplicate check hold.
    await tx
      .selectFrom('orgs')
      .select('id')
      .where('id', '=', orgId)
      .forUpdate()
      .executeTakeFirstOrThrow();
    const dup = await tx
      .selectFrom('ssh_keys')
      .select('id')
      .where('org_id', '=', orgId)
      .where('fingerprint', '=', parsed.fingerprint)
      .executeTakeFirst();
    if (dup)
      throw new ApiError(
        'duplicate',
        `This key (${parsed.fingerprint}) is already present as ${dup.id}.`,
      );
    const { n } = await tx
      .selectFrom('ssh_keys')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('org_id', '=', orgId)
      .executeTakeFirstOrThrow();
    if (Number(n) >= SSH_KEY_LIMIT) {
      throw new ApiError(
        'limit',
        `The organization has ${SSH_KEY_LIMIT} SSH keys, as many as allowed.`,
        {
          limit: SSH_KEY_LIMIT,
          current: Number(n),
        },
      );
    }
    const row = await tx
      .insertInto('ssh_keys')
      .values({
        id: newId('ssh'),
        org_id: orgId,
        user_id: userId,
        name:
          body.name ??
          parsed.comment?.slice(0, 100) ??
          `${parsed.type} ${parsed.fingerprint.slice(7, 15)}`,
        type: parsed.type,
        bits: parsed.bits,
        fingerprint: parsed.fingerprint,
        public_key: parsed.normalized,
        created_at: ctx.clock(),
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    return toKey(row);
  });
}

export async function deleteSshKey(ctx: ServiceContext, orgId: string, id: string): Promise<void> {
  const res = await ctx.db
    .deleteFrom('ssh_keys')
    .where('org_id', '=', orgId)
    .where('id', '=', id)
    .executeTakeFirst();
  if (res.numDeletedRows === 0n) throw notFound('SSH key');
  // Sessions the key opened at the gateway end at once, on every replica.
  await ctx.auth.keyRevoked(id, orgId);
}

type TokenRow = {
  id: string;
  app_name: string;
  machine: string | null;
  prefix: string;
  expires_at: Date;
  created_at: Date;
};

function toToken(r: TokenRow, now: Date) {
  return {
    id: r.id,
    app: r.app_name,
    ...(r.machine ? { machine: r.machine } : {}),
    prefix: r.prefix,
    expiresAt: r.expires_at.toISOString(),
    expired: r.expires_at.getTime() <= now.getTime(),
    createdAt: r.created_at.toISOString(),
  };
}

export async function listSshTokens(ctx: ServiceContext, orgId: string) {
  const now = ctx.clock();
  const rows = await ctx.db
    .selectFrom('ssh_tokens')
    .selectAll()
    .where('org_id', '=', orgId)
    .orderBy('created_at')
    .execute();
  return rows.map((r) => toToken(r, now));
}

/** Mints a token that opens an SSH connection to one app through the gateway. */
export async function createSshToken(
  ctx: ServiceContext,
  gateway: SshGateway,
  orgId: string,
  body: CreateSshTokenBody,
) {
  try {
    await findApp(ctx.db, orgId, body.app);
  } catch (err) {
    if (err instanceof ApiError && err.code === 'not-found') {
      throw badRequest([{ path: 'app', message: `no app '${body.app}' in this organization` }]);
    }
    throw err;
  }
  const now = ctx.clock();
  const secret = mintSecret('piers');
  const row = await ctx.db
    .insertInto('ssh_tokens')
    .values({
      id: newId('sst'),
      org_id: orgId,
      app_name: body.app,
      machine: body.machine ?? null,
      prefix: secret.prefix,
      hash: secret.hash,
      expires_at: new Date(now.getTime() + (body.ttlS ?? DEFAULT_SSH_TOKEN_TTL_S) * 1000),
      created_at: now,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  const [host, port] = splitAddress(gateway.address);
  return {
    ...toToken(row, now),
    token: secret.value,
    host,
    port,
    hostKey: gateway.hostKey,
    command: `ssh -p ${port} ${secret.value}@${host}`,
  };
}

export async function deleteSshToken(
  ctx: ServiceContext,
  orgId: string,
  id: string,
): Promise<void> {
  const res = await ctx.db
    .deleteFrom('ssh_tokens')
    .where('org_id', '=', orgId)
    .where('id', '=', id)
    .executeTakeFirst();
  if (res.numDeletedRows === 0n) throw notFound('SSH token');
  // Sessions the token opened at the gateway end at once, on every replica.
  await ctx.auth.keyRevoked(id, orgId);
}

export function splitAddress(address: string): [string, number] {
  const i = address.lastIndexOf(':');
  return [address.slice(0, i).replace(/^\[|\]$/g, ''), Number(address.slice(i + 1))];
}

export function gatewayAnswer(gateway: SshGateway) {
  const [host, port] = splitAddress(gateway.address);
  return {
    address: gateway.address,
    host,
    port,
    hostKey: gateway.hostKey,
    hostKeyFingerprint: gateway.fingerprint,
  };
}
