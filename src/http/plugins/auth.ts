/**
 * The one place where every route's auth row is enforced (DESIGN 3.1). Keys, scopes,
 * suspension and delegation are checked as the request arrives; agent tokens are judged
 * and audited once the body is parsed (some routes name their app in the body), before
 * validation and before the handler runs.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ApiError } from '../../errors/api-error.js';
import { constantTimeEqual } from '../../crypto/tokens.js';
import { judgeAgent } from '../../services/agent-judge.js';
import { recordAgentAction } from '../../services/agent-actions.js';
import type { AuthenticatedKey, Authenticator } from '../../services/authenticator.js';
import { neededScopeSentence, scopesCover } from '../../services/scopes.js';
import type { Clock } from '../../services/context.js';
import type { Db } from '../../store/db.js';
import type { RouteAuth } from '../route-auth.js';

export interface Principal {
  key: AuthenticatedKey;
  /** The organization the request acts as (the managed one under delegation). */
  orgId: string;
  /** Aborted when the key is revoked while the request runs. */
  signal: AbortSignal;
}

declare module 'fastify' {
  interface FastifyRequest {
    principal: Principal | null;
    /** Set by `X-Platform-Org` on an agent token: refused by the judge, and audited. */
    agentUsedOrgHeader: boolean;
  }
}

export interface AuthDeps {
  db: Db;
  clock: Clock;
  authenticator: Authenticator;
  operatorToken: string;
}

function bearer(req: FastifyRequest): string | undefined {
  const h = req.headers.authorization;
  if (!h) return undefined;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(h);
  return m?.[1];
}

/** The principal of an authenticated route: a handler on such a route always has one. */
export function principalOf(req: FastifyRequest): Principal {
  if (!req.principal) throw new Error('route has no principal; is its auth row declared?');
  return req.principal;
}

export function installAuth(app: FastifyInstance, deps: AuthDeps): void {
  app.decorateRequest('principal', null);
  app.decorateRequest('agentUsedOrgHeader', false);

  // A route without an auth row would be open by accident: refuse to start instead.
  app.addHook('onRoute', (route) => {
    const guard = route.config?.auth;
    if (!guard && !route.url.startsWith('/docs')) {
      throw new Error(`route ${route.method} ${route.url} declares no auth row`);
    }
  });

  app.addHook('onRequest', async (req) => {
    const guard = req.routeOptions.config?.auth;
    if (!guard || guard === 'public') return;
    const token = bearer(req);
    if (guard === 'operator') {
      if (!token || !constantTimeEqual(token, deps.operatorToken)) {
        throw new ApiError(
          'unauthenticated',
          'The operator API needs the operator token as a Bearer.',
        );
      }
      return;
    }
    if (!token)
      throw new ApiError('unauthenticated', 'Send an API key as `Authorization: Bearer <key>`.');
    const key = await deps.authenticator.authenticate(token);
    if (!key) throw new ApiError('unauthenticated', 'The API key is unknown, revoked or expired.');
    const own = await deps.authenticator.org(key.orgId);
    if (!own) throw new ApiError('unauthenticated', 'The API key is unknown, revoked or expired.');
    if (own.suspended) throw new ApiError('org-suspended');

    let orgId = key.orgId;
    const header = req.headers['x-platform-org'];
    if (typeof header === 'string' && header.length > 0) {
      if (key.agent) {
        req.agentUsedOrgHeader = true;
      } else if (header !== key.orgId) {
        const target = await deps.authenticator.org(header);
        if (!target || target.managedBy !== key.orgId) {
          throw new ApiError(
            'delegation-refused',
            `This key's organization does not manage the organization '${header}'.`,
          );
        }
        if (target.suspended) throw new ApiError('org-suspended');
        orgId = target.id;
      }
    }

    const rule = guard as RouteAuth;
    const appName = rule.app?.(req);
    if (!scopesCover(key.scopes, rule.access, appName)) {
      throw new ApiError('token-scope', neededScopeSentence(rule.access, appName));
    }
    if (rule.consoleAdmin && !(key.console && key.role === 'admin' && key.scopes === null)) {
      throw new ApiError('billing-console-only');
    }
    const tracked = deps.authenticator.track(key.id);
    req.principal = { key, orgId, signal: tracked.signal };
    req.raw.once('close', tracked.done);
  });

  app.addHook('preValidation', async (req) => {
    const p = req.principal;
    if (!p?.key.agent) return;
    const rule = req.routeOptions.config.auth as RouteAuth;
    const appName = rule.app?.(req);
    const code = judgeAgent(p.key.agent, {
      rule: rule.agent,
      app: appName,
      usesOrgHeader: req.agentUsedOrgHeader,
    });
    try {
      await recordAgentAction(deps.db, {
        orgId: p.key.orgId,
        tokenId: p.key.id,
        method: req.method,
        route: req.routeOptions.url ?? req.url,
        path: req.url,
        app: appName,
        code,
        requestId: req.id,
        at: deps.clock(),
      });
    } catch (err) {
      req.log.error({ err }, 'agent audit write failed');
      if (!code) throw new ApiError('agent-audit-unavailable');
    }
    if (code) throw new ApiError(code);
  });
}
