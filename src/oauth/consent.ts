/**
 * The console's side of a login (spec 4.2): a signed-in person looks at a pending
 * request and decides what the client may do. A request is answerable once, within its
 * ten minutes (409 `not-answerable` after); one decided by another organization answers
 * 404 like a missing one. An approval stores the grant and hands out one code.
 */
import { AGENT_CLASSES, type KeyAgent } from '../contracts/tokens.js';
import {
  type ConsentDecideBody,
  type ConsentDecided,
  type ConsentLookup,
  GRANT_DAYS,
} from '../contracts/oauth.js';
import { mintSecret, newId } from '../crypto/tokens.js';
import { ApiError, notFound } from '../errors/api-error.js';
import type { ServiceContext } from '../services/context.js';
import type { Executor } from '../store/db.js';
import { withParams } from './authorize.js';
import { ACCESS_TOKEN_TTL_S, CODE_TTL_S, issuerOf } from './urls.js';

const CODE_KIND = 'pierc';

/** The person deciding: the organization the key acts as, and who they are. */
export interface Decider {
  orgId: string;
  userId: string | null;
}

async function requestFor(ex: Executor, requestId: string, orgId: string, lock = false) {
  let q = ex.selectFrom('oauth_requests').selectAll().where('id', '=', requestId);
  if (lock) q = q.forUpdate();
  const row = await q.executeTakeFirst();
  // A request someone else's organization decided is not this one's to see.
  if (!row || (row.org_id !== null && row.org_id !== orgId)) throw notFound('Consent request');
  return row;
}

function notAnswerable(status: string, expired: boolean): ApiError {
  return new ApiError(
    'not-answerable',
    expired
      ? 'This consent request has expired; start the login again from the client.'
      : `This consent request was already ${status}.`,
  );
}

export async function lookupConsent(
  ctx: ServiceContext,
  who: Decider,
  requestId: string,
): Promise<ConsentLookup> {
  const row = await requestFor(ctx.db, requestId, who.orgId);
  const expired = row.expires_at.getTime() <= ctx.clock().getTime();
  if (row.status !== 'pending' || expired) throw notAnswerable(row.status, expired);
  const apps = await ctx.db
    .selectFrom('apps')
    .select('name')
    .where('org_id', '=', who.orgId)
    .orderBy('name')
    .execute();
  return {
    requestId: row.id,
    client: {
      id: row.client_id,
      ...(row.client_name ? { name: row.client_name } : {}),
      verified: row.verified,
      redirectUri: row.redirect_uri,
      redirectHost: new URL(row.redirect_uri).host,
    },
    scopes: row.scopes,
    requestedFrom: row.requested_from,
    requestedAt: row.created_at.toISOString(),
    expiresAt: row.expires_at.toISOString(),
    choices: {
      agentClasses: [...AGENT_CLASSES],
      // Read-only unless the person chooses more (issue 15: production preselected).
      agentClass: 'production',
      apps: apps.map((a) => a.name),
      prodDataRead: false,
      expiresInDays: { ...GRANT_DAYS },
    },
  };
}

export async function decideConsent(
  ctx: ServiceContext,
  who: Decider,
  body: ConsentDecideBody,
): Promise<ConsentDecided> {
  const now = ctx.clock();
  return ctx.db.transaction().execute(async (tx) => {
    const row = await requestFor(tx, body.requestId, who.orgId, true);
    const expired = row.expires_at.getTime() <= now.getTime();
    if (row.status !== 'pending' || expired) throw notAnswerable(row.status, expired);
    const iss = issuerOf(ctx.config.publicUrl);
    if (!body.approve) {
      await tx
        .updateTable('oauth_requests')
        .set({ status: 'denied', org_id: who.orgId })
        .where('id', '=', row.id)
        .execute();
      const redirectUrl = withParams(row.redirect_uri, {
        error: 'access_denied',
        error_description: 'The person declined the request.',
        state: row.state ?? undefined,
        iss,
      });
      return { redirectUrl, approved: false };
    }
    const agent: KeyAgent = { class: body.agentClass };
    if (body.apps) agent.apps = body.apps;
    if (body.agentClass === 'production') agent.prodDataRead = body.prodDataRead ?? false;
    // Without offline_access there is no refresh: the grant ends with its one access token.
    const lifetimeMs = row.scopes.includes('offline_access')
      ? (body.expiresInDays ?? GRANT_DAYS.default) * 86_400_000
      : (CODE_TTL_S + ACCESS_TOKEN_TTL_S) * 1000;
    const grantId = newId('grant');
    // An approved client no longer counts toward the cap of unused ones (totals.ts).
    await tx
      .updateTable('oauth_clients')
      .set({ used_at: now })
      .where('id', '=', row.client_id)
      .where('used_at', 'is', null)
      .execute();
    await tx
      .insertInto('oauth_grants')
      .values({
        id: grantId,
        org_id: who.orgId,
        user_id: who.userId,
        client_id: row.client_id,
        client_name: row.client_name,
        verified: row.verified,
        redirect_uri: row.redirect_uri,
        scopes: row.scopes,
        agent: JSON.stringify(agent),
        created_at: now,
        expires_at: new Date(now.getTime() + lifetimeMs),
      })
      .execute();
    const code = mintSecret(CODE_KIND);
    await tx
      .updateTable('oauth_requests')
      .set({
        status: 'approved',
        org_id: who.orgId,
        grant_id: grantId,
        code_hash: code.hash,
        code_expires_at: new Date(now.getTime() + CODE_TTL_S * 1000),
      })
      .where('id', '=', row.id)
      .execute();
    const redirectUrl = withParams(row.redirect_uri, {
      code: code.value,
      state: row.state ?? undefined,
      iss,
    });
    return { redirectUrl, approved: true, grantId };
  });
}
