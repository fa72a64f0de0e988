/**
 * `POST /v1/oauth/token` (RFC 6749 4.1.3, 6; OAuth 2.1): the code with its PKCE verifier,
 * and refresh grants that rotate the refresh token. A code is single-use and lives 60 s;
 * a code or refresh token shown a second time means it leaked, and the grant it belongs
 * to is revoked with every token it issued (RFC 9700 2.2.2, 4.14). Errors have OAuth's
 * shape (`error`, `error_description`), not pier's.
 */
import { createHash } from 'node:crypto';
import { sha256 } from '../crypto/tokens.js';
import type { ServiceContext } from '../services/context.js';
import type { Tx } from '../store/db.js';
import { announceRevoked, type IssuedTokens, issueTokens, revokeGrantIn } from './grants.js';
import { mcpResourceOf } from './urls.js';

/** An OAuth error of the token endpoint (RFC 6749 5.2): always answered 400. */
export class OAuthError extends Error {
  constructor(
    readonly error:
      'invalid_request' | 'invalid_grant' | 'unsupported_grant_type' | 'invalid_target',
    readonly description: string,
  ) {
    super(description);
  }

  toBody() {
    return { error: this.error, error_description: this.description };
  }
}

type Form = Record<string, string | undefined>;

/** What a transaction decided: tokens, or a refusal to answer once it has committed. */
type Outcome =
  | { tokens: IssuedTokens; orgId: string }
  | { refusal: OAuthError; revoked?: { orgId: string; keyIds: string[] } };

const VERIFIER = /^[A-Za-z0-9._~-]{43,128}$/;

/** PKCE S256 (RFC 7636 4.6): the challenge a verifier answers. */
const s256 = (verifier: string) => createHash('sha256').update(verifier).digest('base64url');

function required(form: Form, names: string[]): void {
  const missing = names.filter((n) => !form[n]);
  if (missing.length) {
    throw new OAuthError('invalid_request', `Missing parameter(s): ${missing.join(', ')}.`);
  }
}

function checkResource(ctx: ServiceContext, form: Form): void {
  const want = mcpResourceOf(ctx.config.publicUrl);
  if (form.resource !== undefined && form.resource !== want) {
    throw new OAuthError('invalid_target', `resource must be ${want}.`);
  }
}

async function leaked(tx: Tx, grantId: string, orgId: string, what: string, now: Date) {
  const keyIds = await revokeGrantIn(tx, grantId, `${what} used twice`, now);
  return {
    refusal: new OAuthError(
      'invalid_grant',
      `This ${what} was already used; the grant is revoked with every token it issued.`,
    ),
    revoked: { orgId, keyIds },
  };
}

async function grantInForce(tx: Tx, grantId: string, now: Date) {
  const grant = await tx
    .selectFrom('oauth_grants')
    .selectAll()
    .where('id', '=', grantId)
    .forUpdate()
    .executeTakeFirstOrThrow();
  const alive = grant.revoked_at === null && grant.expires_at.getTime() > now.getTime();
  return { grant, alive };
}

async function exchangeCode(ctx: ServiceContext, form: Form, now: Date): Promise<Outcome> {
  required(form, ['code', 'code_verifier', 'client_id', 'redirect_uri']);
  checkResource(ctx, form);
  return ctx.db.transaction().execute(async (tx): Promise<Outcome> => {
    const req = await tx
      .selectFrom('oauth_requests')
      .selectAll()
      .where('code_hash', '=', sha256(form.code!))
      .forUpdate()
      .executeTakeFirst();
    const unknown = new OAuthError('invalid_grant', 'The code is unknown, expired or used.');
    if (!req || !req.grant_id || !req.org_id) return { refusal: unknown };
    if (req.code_used_at) return leaked(tx, req.grant_id, req.org_id, 'code', now);
    if (req.code_expires_at!.getTime() <= now.getTime()) return { refusal: unknown };
    // The code is spent by any attempt: a wrong verifier does not leave it for a retry.
    await tx
      .updateTable('oauth_requests')
      .set({ code_used_at: now })
      .where('id', '=', req.id)
      .execute();
    if (form.client_id !== req.client_id) {
      return { refusal: new OAuthError('invalid_grant', 'The code was issued to another client.') };
    }
    if (form.redirect_uri !== req.redirect_uri) {
      return {
        refusal: new OAuthError('invalid_grant', 'redirect_uri differs from the authorization.'),
      };
    }
    const verifier = form.code_verifier!;
    if (!VERIFIER.test(verifier) || s256(verifier) !== req.code_challenge) {
      return { refusal: new OAuthError('invalid_grant', 'The code_verifier does not match.') };
    }
    const { grant, alive } = await grantInForce(tx, req.grant_id, now);
    if (!alive) return { refusal: unknown };
    return { tokens: await issueTokens(tx, grant, now), orgId: grant.org_id };
  });
}

async function refresh(ctx: ServiceContext, form: Form, now: Date): Promise<Outcome> {
  required(form, ['refresh_token', 'client_id']);
  checkResource(ctx, form);
  return ctx.db.transaction().execute(async (tx): Promise<Outcome> => {
    const row = await tx
      .selectFrom('oauth_refresh_tokens')
      .selectAll()
      .where('hash', '=', sha256(form.refresh_token!))
      .forUpdate()
      .executeTakeFirst();
    const unknown = new OAuthError('invalid_grant', 'The refresh token is unknown or revoked.');
    if (!row) return { refusal: unknown };
    const { grant, alive } = await grantInForce(tx, row.grant_id, now);
    if (grant.client_id !== form.client_id) {
      return {
        refusal: new OAuthError('invalid_grant', 'The token was issued to another client.'),
      };
    }
    if (row.spent_at) {
      if (!alive) return { refusal: unknown };
      return leaked(tx, grant.id, grant.org_id, 'refresh token', now);
    }
    if (!alive) return { refusal: unknown };
    await tx
      .updateTable('oauth_refresh_tokens')
      .set({ spent_at: now })
      .where('hash', '=', row.hash)
      .execute();
    return { tokens: await issueTokens(tx, grant, now), orgId: grant.org_id };
  });
}

/** One token request; throws OAuthError for the route to render. */
export async function tokenRequest(ctx: ServiceContext, form: Form): Promise<IssuedTokens> {
  const now = ctx.clock();
  let outcome: Outcome;
  if (form.grant_type === 'authorization_code') outcome = await exchangeCode(ctx, form, now);
  else if (form.grant_type === 'refresh_token') outcome = await refresh(ctx, form, now);
  else if (!form.grant_type) throw new OAuthError('invalid_request', 'grant_type is required.');
  else {
    throw new OAuthError(
      'unsupported_grant_type',
      'grant_type must be authorization_code or refresh_token.',
    );
  }
  if ('tokens' in outcome) {
    // A new key of the organization: its key listings must be read again.
    await ctx.auth.keysChanged(outcome.orgId);
    return outcome.tokens;
  }
  if (outcome.revoked) await announceRevoked(ctx, outcome.revoked.orgId, outcome.revoked.keyIds);
  throw outcome.refusal;
}
