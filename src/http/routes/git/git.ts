/**
 * `git push {base_url}/git/<app>.git` (CONTRACT 8): git's smart HTTP protocol, push only.
 * `GET …/info/refs?service=git-receive-pack` advertises the app repository's refs, `POST
 * …/git-receive-pack` runs one receive-pack round (services/git/push.ts: the pack, the
 * hook, the build and the deploy, told as `remote:` lines). Fetching and cloning are
 * refused. The key is a Bearer or HTTP Basic's password (any user name), with deploy
 * rights on the app, as `POST /v1/apps/:name/deploys` wants. The pack is streamed into
 * receive-pack, never held, and capped. docs/api.md ("git push") documents the answers.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { PassThrough, Transform, type Readable } from 'node:stream';
import { createGunzip } from 'node:zlib';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { gitRefsQuery, gitRepoParams } from '../../../contracts/git.js';
import { ApiError } from '../../../errors/api-error.js';
import { creditBlocked, creditBlockedError } from '../../../services/billing/blocking.js';
import { advertiseRefs, pushTarget, receivePush } from '../../../services/git/push.js';
import { FETCH_REFUSED } from '../../../services/git/ssh-push.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';
import { auth, type RouteAuth } from '../../route-auth.js';

/** `web.git` (or `web`) → `web`. */
function appOfRepo(repo: string): string {
  return repo.endsWith('.git') ? repo.slice(0, -4) : repo;
}

const appFromRepo = (req: FastifyRequest): string | undefined => {
  const repo = (req.params as { repo?: string } | undefined)?.repo;
  return repo === undefined ? undefined : appOfRepo(repo);
};

/** Deploy rights on the app, the key as Bearer or Basic (see route-auth.ts `basic`). */
const pushAuth: RouteAuth = { ...auth.D('AW', appFromRepo), basic: true };

/** git shows a `text/plain` error body to the person (as `remote:` lines); JSON it does not. */
function gitClient(req: FastifyRequest): boolean {
  return /^git\//.test(req.headers['user-agent'] ?? '');
}

/** pkt-line framing (git's protocol): 4 hex digits of length, then the data. */
function pktLine(text: string): string {
  return (text.length + 4).toString(16).padStart(4, '0') + text;
}

/** Refuses a push before git starts while credit is at zero (the POST would, as a write). */
async function assertCreditOpen(req: FastifyRequest, { ctx }: AppDeps): Promise<void> {
  if (await creditBlocked(ctx.db, principalOf(req).orgId)) throw creditBlockedError();
}

/** The request body as bytes, un-gzipped if git compressed it, and capped. */
function packStream(req: FastifyRequest, maxBytes: number): Readable {
  const encoding = (req.headers['content-encoding'] ?? '').toLowerCase();
  if (encoding !== '' && encoding !== 'gzip' && encoding !== 'identity') {
    throw new ApiError('unsupported-media-type', `Content-Encoding ${encoding} is not taken.`);
  }
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > maxBytes) {
    throw new ApiError('too-large', `A push may send at most ${maxBytes} bytes.`, {
      limit: maxBytes,
    });
  }
  if (encoding !== 'gzip') return req.raw;
  let seen = 0;
  const cap = new Transform({
    transform(chunk: Buffer, _enc, done) {
      seen += chunk.length;
      done(seen > maxBytes ? new Error('the body unpacks past the cap') : null, chunk);
    },
  });
  const gunzip = createGunzip();
  req.raw.on('error', (err) => gunzip.destroy(err));
  gunzip.on('error', (err) => cap.destroy(err));
  return req.raw.pipe(gunzip).pipe(cap);
}

export function gitRoutes(root: FastifyInstance, deps: AppDeps): void {
  const { ctx } = deps;
  void root.register(async (scope) => {
    // The body is git's pack: never parsed, streamed into receive-pack.
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', (_req, _payload, done) => done(null, undefined));
    // The same refusals as every route, but as text for git, which shows text to the person.
    scope.setErrorHandler((err, req, reply) => {
      if (!(err instanceof ApiError) || !gitClient(req)) throw err;
      return reply
        .code(err.status)
        .type('text/plain; charset=utf-8')
        .send(`${err.message} (${err.code})\n`);
    });
    const app = scope.withTypeProvider<ZodTypeProvider>();

    app.get('/git/:repo/info/refs', {
      config: { auth: pushAuth },
      schema: { hide: true, params: gitRepoParams, querystring: gitRefsQuery },
      handler: async (req, reply: FastifyReply) => {
        const service = req.query.service;
        if (service === 'git-upload-pack') throw new ApiError('forbidden', FETCH_REFUSED);
        if (service !== 'git-receive-pack') {
          throw new ApiError(
            'bad-request',
            'pier speaks git smart HTTP: ask for ?service=git-receive-pack (git does).',
          );
        }
        await assertCreditOpen(req, deps);
        const { repo } = await pushTarget(ctx, principalOf(req).orgId, appOfRepo(req.params.repo));
        const body = new PassThrough();
        body.write(pktLine('# service=git-receive-pack\n'));
        body.write('0000');
        (await advertiseRefs(ctx, repo)).pipe(body);
        return reply
          .header('cache-control', 'no-cache')
          .type('application/x-git-receive-pack-advertisement')
          .send(body);
      },
    });

    app.post('/git/:repo/git-receive-pack', {
      config: { auth: pushAuth },
      schema: { hide: true, params: gitRepoParams },
      handler: async (req, reply: FastifyReply) => {
        if (req.headers['content-type'] !== 'application/x-git-receive-pack-request') {
          req.raw.resume();
          throw new ApiError(
            'unsupported-media-type',
            'Send the body as application/x-git-receive-pack-request (git does).',
          );
        }
        const p = principalOf(req);
        const target = await pushTarget(ctx, p.orgId, appOfRepo(req.params.repo));
        const stdin = packStream(req, Math.floor(ctx.config.buildSourceMaxMb * 1024 * 1024));
        const out = new PassThrough();
        // Answered at once: git reads the result (and the hook's words) as they come.
        void receivePush(ctx, p.orgId, target, 'stateless', {
          stdin,
          stdout: out,
          signal: p.signal,
        }).catch((err: unknown) => {
          req.log.error({ err }, 'git push failed');
          out.destroy();
        });
        return reply
          .header('cache-control', 'no-cache')
          .type('application/x-git-receive-pack-result')
          .send(out);
      },
    });

    app.post('/git/:repo/git-upload-pack', {
      config: { auth: pushAuth },
      schema: { hide: true, params: gitRepoParams },
      handler: async (req) => {
        req.raw.resume();
        throw new ApiError('forbidden', FETCH_REFUSED);
      },
    });
  });
}
