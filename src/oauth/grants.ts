/**
 * Grants: what a person gave a client (spec 5.9). Each access token a grant issues is an
 * agent key of the person's organization with the grant's agent block (services/keys.ts),
 * so the agent judge and the audit apply to it as to any agent token; revoking the grant
 * revokes those keys and ends its refresh tokens at once.
 */
import type { GrantRecord } from '../contracts/oauth.js';
import { mintSecret } from '../crypto/tokens.js';
import { notFound } from '../errors/api-error.js';
import type { ServiceContext } from '../services/context.js';
import { mintKey } from '../services/keys.js';
import type { Executor, Tx } from '../store/db.js';
import type { OAuthGrantsTable } from '../store/schema.js';
import type { Selectable } from 'kysely';
import { ACCESS_TOKEN_TTL_S } from './urls.js';

export type GrantRow = Selectable<OAuthGrantsTable>;

/** The kind of a refresh token's value (`pierr_…`), like keys' `pier_…`. */
const REFRESH_KIND = 'pierr';

export interface IssuedTokens {
  access_token: string;
  token_type: 'Bearer';
  expires_in: number;
  scope: string;
  refresh_token?: string;
}

/**
 * A fresh access token of the grant, and a refresh token when it has `offline_access`.
 * Runs inside the caller's transaction: the code or refresh token it spends and the
 * tokens it issues commit together.
 */
export async function issueTokens(tx: Tx, grant: GrantRow, now: Date): Promise<IssuedTokens> {
  // The grant's access tokens that have run out are marked revoked: they can do nothing
  // more, and a client refreshing hourly for a month would otherwise fill the key list.
  await tx
    .updateTable('api_keys')
    .set({ revoked_at: now })
    .where('revoked_at', 'is', null)
    .where('expires_at', '<=', now)
    .where('id', 'in', (s) =>
      s.selectFrom('oauth_grant_keys').select('key_id').where('grant_id', '=', grant.id),
    )
    .execute();
  const until = Math.min(now.getTime() + ACCESS_TOKEN_TTL_S * 1000, grant.expires_at.getTime());
  const expiresAt = new Date(until);
  const key = await mintKey(
    tx,
    now,
    { orgId: grant.org_id, userId: grant.user_id, expiresAt: grant.expires_at },
    {
      name: `OAuth: ${grant.client_name ?? grant.client_id}`.slice(0, 120),
      expiresAt: expiresAt.toISOString(),
      agent: grant.agent,
    },
  );
  // Bound to the MCP endpoint (RFC 8707): the token is refused on the routes called directly.
  await tx.updateTable('api_keys').set({ audience: 'mcp' }).where('id', '=', key.id).execute();
  await tx.insertInto('oauth_grant_keys').values({ grant_id: grant.id, key_id: key.id }).execute();
  const issued: IssuedTokens = {
    access_token: key.token,
    token_type: 'Bearer',
    expires_in: Math.max(1, Math.floor((until - now.getTime()) / 1000)),
    scope: grant.scopes.join(' '),
  };
  if (grant.scopes.includes('offline_access')) {
    const refresh = mintSecret(REFRESH_KIND);
    await tx
      .insertInto('oauth_refresh_tokens')
      .values({ hash: refresh.hash, grant_id: grant.id, created_at: now })
      .execute();
    issued.refresh_token = refresh.value;
  }
  return issued;
}

/**
 * Marks the grant revoked and revokes the keys it issued. Returns their ids: the caller
 * tells the authenticator once its transaction has committed.
 */
export async function revokeGrantIn(
  ex: Executor,
  grantId: string,
  why: string,
  now: Date,
): Promise<string[]> {
  await ex
    .updateTable('oauth_grants')
    .set({ revoked_at: now, revoked_why: why })
    .where('id', '=', grantId)
    .where('revoked_at', 'is', null)
    .execute();
  const keys = await ex
    .updateTable('api_keys')
    .set({ revoked_at: now })
    .where('revoked_at', 'is', null)
    .where('id', 'in', (s) =>
      s.selectFrom('oauth_grant_keys').select('key_id').where('grant_id', '=', grantId),
    )
    .returning(['id'])
    .execute();
  return keys.map((k) => k.id);
}

/** Tells every replica's authenticator that these keys are revoked. */
export async function announceRevoked(
  ctx: ServiceContext,
  orgId: string,
  keyIds: string[],
): Promise<void> {
  for (const id of keyIds) await ctx.auth.keyRevoked(id, orgId);
  await ctx.auth.keysChanged(orgId);
}

function toRecord(row: GrantRow): GrantRecord {
  return {
    id: row.id,
    clientId: row.client_id,
    ...(row.client_name ? { clientName: row.client_name } : {}),
    verified: row.verified,
    redirectUri: row.redirect_uri,
    ...(row.user_id ? { userId: row.user_id } : {}),
    scopes: row.scopes,
    agent: row.agent,
    createdAt: row.created_at.toISOString(),
    expiresAt: row.expires_at.toISOString(),
  };
}

/** The organization's grants still in force, oldest first. */
export async function listGrants(ctx: ServiceContext, orgId: string): Promise<GrantRecord[]> {
  const rows = await ctx.db
    .selectFrom('oauth_grants')
    .selectAll()
    .where('org_id', '=', orgId)
    .where('revoked_at', 'is', null)
    .where('expires_at', '>', ctx.clock())
    .orderBy('created_at')
    .orderBy('id')
    .execute();
  return rows.map(toRecord);
}

/** Revokes a grant of the organization; another organization's answers like a missing one. */
export async function revokeGrant(ctx: ServiceContext, orgId: string, id: string): Promise<void> {
  const now = ctx.clock();
  const keyIds = await ctx.db.transaction().execute(async (tx) => {
    const row = await tx
      .selectFrom('oauth_grants')
      .select('id')
      .where('id', '=', id)
      .where('org_id', '=', orgId)
      .where('revoked_at', 'is', null)
      .forUpdate()
      .executeTakeFirst();
    if (!row) return undefined;
    return revokeGrantIn(tx, id, 'revoked by the organization', now);
  });
  if (!keyIds) throw notFound('Grant');
  await announceRevoked(ctx, orgId, keyIds);
}
