/**
 * The auth row of a route, declared as data next to the route (spec part 4 shorthand):
 * which keys may call it (F, R, D), what agent tokens may do (A0, AW, AA, AD), and
 * which app the request concerns. One plugin (plugins/auth.ts) enforces every row.
 */
import type { FastifyRequest } from 'fastify';
import type { AgentRule } from '../services/agent-judge.js';
import type { Access } from '../services/scopes.js';

export interface RouteAuth {
  /** Any one of these grants access. */
  access: Access[];
  /** Absent: the route is unknown to the agent rules, and agent tokens are refused. */
  agent?: AgentRule;
  /**
   * `tool`: agent tokens are judged (and audited) not here but by the route each tool of
   * the request runs as (`/v1/mcp`, spec 4.12: "the tool named inside the call decides").
   */
  agentJudgedBy?: 'tool';
  /** The app the request concerns, if any (read from params or the raw body). */
  app?: (req: FastifyRequest) => string | undefined;
  /**
   * The app, for routes that name it only through another object (`/v1/machines/:id`):
   * looked up in the caller's organization when an agent token is judged.
   */
  appOf?: (req: FastifyRequest, orgId: string) => Promise<string | undefined>;
  /**
   * What the request would hand its app from outside it, if anything (attaching a
   * database or a bucket gives the app's machines its credentials): named, it is refused
   * to agent tokens limited to some apps (`agent-token-app-scope`). Reads the parsed,
   * not yet validated body.
   */
  widens?: (req: FastifyRequest) => string | undefined;
  /** Billing changes: only console keys of admins pass (spec 5.7). */
  consoleAdmin?: boolean;
  /**
   * The key may also come as the password of HTTP Basic (any user name), for clients
   * that know no other scheme (git over HTTPS); a 401 then carries
   * `WWW-Authenticate: Basic realm="pier"`, so such a client asks for it.
   */
  basic?: boolean;
}

/**
 * Public entrances (device code, token poll, sign-in, health); the operator API; and the
 * S3 gateway, which checks its own SigV4 signatures.
 */
export type RouteGuard = RouteAuth | 'public' | 'operator' | 'gateway';

declare module 'fastify' {
  interface FastifyContextConfig {
    auth?: RouteGuard;
  }
}

/** The app named by the `:name` path parameter. */
export const appFromParams = (req: FastifyRequest): string | undefined =>
  (req.params as Record<string, string | undefined>)?.name;

/** The app named by a field of the (parsed, not yet validated) body. */
export const appFromBodyField =
  (field: string) =>
  (req: FastifyRequest): string | undefined => {
    const body = req.body as Record<string, unknown> | undefined;
    const value = body?.[field];
    return typeof value === 'string' ? value : undefined;
  };

/** The app named by the `app` field of the body. */
export const appFromBody = appFromBodyField('app');

export const auth = {
  F: (agent?: AgentRule, app?: RouteAuth['app']): RouteAuth => ({ access: ['F'], agent, app }),
  R: (agent?: AgentRule, app?: RouteAuth['app']): RouteAuth => ({ access: ['R'], agent, app }),
  D: (agent?: AgentRule, app?: RouteAuth['app']): RouteAuth => ({ access: ['D'], agent, app }),
  DorR: (agent?: AgentRule, app?: RouteAuth['app']): RouteAuth => ({
    access: ['D', 'R'],
    agent,
    app,
  }),
};
