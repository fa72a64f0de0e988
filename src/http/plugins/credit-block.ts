/**
 * The one check of a blocked credit account (spec 3, 7.1): while an organization's credit
 * is at zero, every write of the control API answers 402 `credit-blocked`, except the
 * routes listed below. Reads (GET, HEAD) stay open, but for the database tunnel (a GET
 * that is a read-write connection: its route checks the block itself). Public entrances
 * (sign-in, device code), the operator API and the S3 gateway carry no key-checked auth
 * row and are not concerned. It runs after the key and agent checks, before validation
 * and the handler, for the organization the request acts as (the managed one under
 * delegation).
 */
import type { FastifyInstance, FastifyRequest, preValidationHookHandler } from 'fastify';
import { creditBlocked, creditBlockedError } from '../../services/billing/blocking.js';
import type { Db } from '../../store/db.js';

const READS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * Writes that pass a blocked account, by route: what stops spending (machine stop and
 * suspend), billing itself, what takes access away (revoking keys, SSH keys and tokens,
 * OAuth grants), signing a command-line client in (device approval, to reach billing),
 * and writes that only read: presigning a download of a bucket object, looking up an
 * OAuth consent request. The MCP endpoint passes: each tool call is judged as the route
 * it runs. A blocked organization's databases are stopped, so nothing that connects to
 * one passes: SQL (read-only too) and a copy's URL answer 402 like any write.
 */
const REVOCATIONS = [
  '/v1/tokens/:id',
  '/v1/ssh-keys/:id',
  '/v1/ssh/tokens/:id',
  '/v1/oauth/grants/:id',
];
const OPEN_POSTS = ['/v1/device/approve', '/v1/oauth/consent/lookup', '/v1/mcp'];
const OPEN_WRITES: ((method: string, url: string, req: FastifyRequest) => boolean)[] = [
  (_m, url) => url.startsWith('/v1/billing/'),
  (m, url, req) =>
    m === 'POST' &&
    url === '/v1/machines/:id/:action' &&
    ['stop', 'suspend'].includes((req.params as { action?: string }).action ?? ''),
  (m, url) => m === 'DELETE' && REVOCATIONS.includes(url),
  (m, url) => m === 'POST' && OPEN_POSTS.includes(url),
  (m, url, req) =>
    m === 'POST' &&
    url === '/v1/buckets/:name/presign' &&
    (req.body as { op?: unknown } | undefined)?.op !== 'put',
];

export function isOpenWhileBlocked(method: string, url: string, req: FastifyRequest): boolean {
  return READS.has(method) || OPEN_WRITES.some((open) => open(method, url, req));
}

function blockHook(db: Db, url: string): preValidationHookHandler {
  return (req, _reply, done) => {
    const p = req.principal;
    if (!p || isOpenWhileBlocked(req.method, url, req)) return done();
    creditBlocked(db, p.orgId).then(
      (blocked) => done(blocked ? creditBlockedError() : undefined),
      done,
    );
  };
}

export function installCreditBlock(app: FastifyInstance, deps: { db: Db }): void {
  app.addHook('onRoute', (route) => {
    const guard = route.config?.auth;
    if (!guard || typeof guard === 'string') return;
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    if (methods.every((m) => READS.has(m))) return;
    const hooks = route.preValidation;
    route.preValidation = [
      ...(hooks === undefined ? [] : Array.isArray(hooks) ? hooks : [hooks]),
      blockHook(deps.db, route.url),
    ];
  });
}
