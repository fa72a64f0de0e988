/**
 * The one place where every route's auth row is enforced (DESIGN 3.1). When a route is
 * registered, its row is turned into hooks of that route: keys, scopes, suspension and
 * delegation are checked as the request arrives; agent tokens are judged and audited
 * once the body is parsed (some routes name their app in the body), before validation
 * and before the handler runs. A route without a row refuses to register.
 */
import type {
  FastifyInstance,
  FastifyRequest,
  onRequestHookHandler,
  preValidationHookHandler,
} from 'fastify';
import { ApiError } from '../../errors/api-error.js';
import { constantTimeEqual } from '../../crypto/tokens.js';
import { judgeAgent } from '../../services/agent-judge.js';
import { recordAgentAction } from '../../services/agent-actions.js';
import type {
  AuthenticatedKey,
  Authenticator,
  OrgAuthState,
} from '../../services/authenticator.js';
import { neededScopeSentence, scopesCover } from '../../services/scopes.js';
import type { Clock } from '../../services/context.js';
import type { Db } from '../../store/db.js';
import { isMcpRequest } from './inner-calls.js';
import { redactUrl } from './redact.js';
import type { RouteAuth } from '../route-auth.js';

export interface Principal {
  key: AuthenticatedKey;
  /** The organization the request acts as (the managed one under delegation). */
  orgId: string;
  /**
   * Aborted when the key is revoked or expires while the request runs, or the
   * organization is suspended, on any replica; its reason is an `AuthEnded`.
   */
  readonly signal: AbortSignal;
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

/** What the key's lookups found: the key, its organization, and a delegated one. */
interface Resolved {
  key: AuthenticatedKey | undefined;
  own: OrgAuthState | undefined;
  target: OrgAuthState | undefined;
}

const UNKNOWN_KEY = 'The API key is unknown, revoked or expired.';

function bearer(req: FastifyRequest): string | undefined {
  const h = req.headers.authorization;
  if (!h || h.length < 8 || h.slice(0, 7).toLowerCase() !== 'bearer ') return undefined;
  const token = h.slice(7).trim();
  return token.length > 0 && !/\s/.test(token) ? token : undefined;
}

/**
 * The key of a route that takes HTTP Basic too (RouteAuth `basic`): the Bearer, else
 * Basic's password (or its user name when the password is empty, as some clients send a
 * token).
 */
function basicOrBearer(req: FastifyRequest): string | undefined {
  const token = bearer(req);
  if (token) return token;
  const h = req.headers.authorization;
  if (!h || h.length < 7 || h.slice(0, 6).toLowerCase() !== 'basic ') return undefined;
  const decoded = Buffer.from(h.slice(6).trim(), 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  const user = colon < 0 ? decoded : decoded.slice(0, colon);
  const password = colon < 0 ? '' : decoded.slice(colon + 1);
  const key = password || user;
  return key.length > 0 && !/\s/.test(key) ? key : undefined;
}

/** The realm a 401 of a Basic route names, so git (and browsers) ask for the key. */
const BASIC_CHALLENGE = 'Basic realm="pier"';

function orgHeader(req: FastifyRequest): string | undefined {
  const h = req.headers['x-platform-org'];
  return typeof h === 'string' && h.length > 0 ? h : undefined;
}

/** The principal of an authenticated route: a handler on such a route always has one. */
export function principalOf(req: FastifyRequest): Principal {
  if (!req.principal) throw new Error('route has no principal; is its auth row declared?');
  return req.principal;
}

/** Looks up what the cache does not hold (first use of a key, or after a change). */
async function resolveSlowly(
  deps: AuthDeps,
  token: string,
  header: string | undefined,
): Promise<Resolved> {
  const key = await deps.authenticator.authenticate(token);
  if (!key) return { key, own: undefined, target: undefined };
  const own = await deps.authenticator.org(key.orgId);
  const target =
    header && header !== key.orgId && !key.agent ? await deps.authenticator.org(header) : undefined;
  return { key, own, target };
}

/** Applies the route's row to what was found; sets the principal or throws the refusal. */
function admit(req: FastifyRequest, rule: RouteAuth, found: Resolved, deps: AuthDeps): void {
  const { key, own } = found;
  if (!key || !own) throw new ApiError('unauthenticated', UNKNOWN_KEY);
  if (own.suspended) throw new ApiError('org-suspended');

  let orgId = key.orgId;
  const header = orgHeader(req);
  if (header && key.agent) {
    req.agentUsedOrgHeader = true;
  } else if (header && header !== key.orgId) {
    const target = found.target;
    if (!target || target.managedBy !== key.orgId) {
      throw new ApiError(
        'delegation-refused',
        `This key's organization does not manage the organization '${header}'.`,
      );
    }
    if (target.suspended) throw new ApiError('org-suspended');
    orgId = target.id;
  }

  if (key.audience === 'mcp' && !isMcpRequest(req)) {
    throw new ApiError(
      'token-scope',
      'This token was issued to an MCP client through OAuth: it is accepted on /v1/mcp only.',
    );
  }
  const appName = rule.app?.(req);
  if (!scopesCover(key.scopes, rule.access, appName)) {
    throw new ApiError('token-scope', neededScopeSentence(rule.access, appName));
  }
  if (rule.consoleAdmin && !(key.console && key.role === 'admin' && key.scopes === null)) {
    throw new ApiError('billing-console-only');
  }
  // Only handlers that wait (long polls, sessions) ask for the signal; the others, nearly
  // all requests, never register in the in-flight table at all.
  let tracked: ReturnType<Authenticator['track']> | undefined;
  req.principal = {
    key,
    orgId,
    get signal() {
      if (!tracked) {
        tracked = deps.authenticator.track(key, orgId);
        // A WebSocket (a shell session) lives as long as its connection, not its request.
        const lifetime = req.raw.headers.upgrade ? req.raw.socket : req.raw;
        if (lifetime.destroyed) tracked.done();
        else lifetime.once('close', tracked.done);
      }
      return tracked.signal;
    },
  };
}

function keyHook(deps: AuthDeps, rule: RouteAuth): onRequestHookHandler {
  // Callback style with a synchronous path: a cached key costs no promise and no query.
  return (req, reply, done) => {
    const refuse = (err: unknown) => {
      if (rule.basic && err instanceof ApiError && err.status === 401) {
        reply.header('www-authenticate', BASIC_CHALLENGE);
      }
      done(err as Error);
    };
    const token = rule.basic ? basicOrBearer(req) : bearer(req);
    if (!token) {
      refuse(
        new ApiError(
          'unauthenticated',
          rule.basic
            ? 'Send an API key as the password of HTTP Basic authentication (any user name), or as a Bearer.'
            : 'Send an API key as `Authorization: Bearer <key>`.',
        ),
      );
      return;
    }
    const header = orgHeader(req);
    const fast = deps.authenticator.cached(token);
    const target =
      fast && header && header !== fast.key.orgId && !fast.key.agent
        ? deps.authenticator.cachedOrg(header)
        : undefined;
    if (fast && (target || !header || header === fast.key.orgId || fast.key.agent)) {
      try {
        admit(req, rule, { key: fast.key, own: fast.org, target }, deps);
      } catch (err) {
        refuse(err);
        return;
      }
      done();
      return;
    }
    resolveSlowly(deps, token, header)
      .then((found) => {
        admit(req, rule, found, deps);
        done();
      })
      .catch(refuse);
  };
}

function operatorHook(deps: AuthDeps): onRequestHookHandler {
  return (req, _reply, done) => {
    const token = bearer(req);
    if (!token || !constantTimeEqual(token, deps.operatorToken)) {
      done(
        new ApiError('unauthenticated', 'The operator API needs the operator token as a Bearer.'),
      );
      return;
    }
    done();
  };
}

function agentHook(deps: AuthDeps, rule: RouteAuth, route: string): preValidationHookHandler {
  return (req, _reply, done) => {
    if (!req.principal?.key.agent || rule.agentJudgedBy === 'tool') return done();
    judgeAgentRequest(req, deps, rule, route).then(() => done(), done);
  };
}

async function judgeAgentRequest(
  req: FastifyRequest,
  deps: AuthDeps,
  rule: RouteAuth,
  route: string,
): Promise<void> {
  const p = req.principal!;
  const appName = rule.app?.(req) ?? (await rule.appOf?.(req, p.orgId));
  const widens = rule.widens?.(req);
  const code = judgeAgent(p.key.agent!, {
    rule: rule.agent,
    app: appName,
    usesOrgHeader: req.agentUsedOrgHeader,
    widens,
  });
  try {
    await recordAgentAction(deps.db, {
      orgId: p.key.orgId,
      tokenId: p.key.id,
      method: req.method,
      route,
      // Admins read the audit back: no presigned signature or token in a query survives.
      path: redactUrl(req.url),
      app: appName,
      code,
      requestId: req.id,
      at: deps.clock(),
    });
  } catch (err) {
    req.log.error({ err }, 'agent audit write failed');
    if (!code) throw new ApiError('agent-audit-unavailable');
  }
  // The app is one of the token's, but the request would widen what it reaches.
  if (
    code === 'agent-token-app-scope' &&
    widens &&
    appName &&
    p.key.agent!.apps?.includes(appName)
  ) {
    throw new ApiError(
      code,
      `An agent token limited to some apps cannot ${widens}: it is the organization's, not the app's, and an attachment hands the app its credentials or data.`,
    );
  }
  if (code) throw new ApiError(code);
}

function asList<T>(hooks: T | T[] | undefined): T[] {
  if (hooks === undefined) return [];
  return Array.isArray(hooks) ? hooks : [hooks];
}

export function installAuth(app: FastifyInstance, deps: AuthDeps): void {
  app.decorateRequest('principal', null);
  app.decorateRequest('agentUsedOrgHeader', false);

  app.addHook('onRoute', (route) => {
    const guard = route.config?.auth;
    // A route without an auth row would be open by accident: refuse to start instead.
    if (!guard) throw new Error(`route ${route.method} ${route.url} declares no auth row`);
    if (guard === 'public' || guard === 'gateway') return;
    if (guard === 'operator') {
      route.onRequest = [operatorHook(deps), ...asList(route.onRequest)];
      return;
    }
    route.onRequest = [keyHook(deps, guard), ...asList(route.onRequest)];
    route.preValidation = [agentHook(deps, guard, route.url), ...asList(route.preValidation)];
  });
}
