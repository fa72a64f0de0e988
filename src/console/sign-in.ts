/**
 * Signing in and out. The form posts here; this calls CONTRACT 4's
 * `POST /console/api/sign-in` (whose own per-address limit applies too), keeps the key in
 * the session cookie, and sends the person back where they were going. Sign-out revokes
 * the key through `DELETE /v1/tokens/:id` and clears the cookie.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { SignInAnswer } from '../contracts/console.js';
import { ConsoleApi } from './api.js';
import { html } from './html.js';
import { bareLayout, errorBox } from './layout.js';
import { asRefusal, safeNext, type ConsoleRouter } from './router.js';
import { checkCsrf, checkSameOrigin, clearSessionCookie, setSessionCookie } from './session.js';
import type { FailedSignIns } from './sign-in-limit.js';

function form(next: string, email = '', refusal?: Parameters<typeof errorBox>[0]) {
  return html`${refusal ? errorBox(refusal) : ''}
    <form method="post" action="/console/sign-in" class="sign-in">
      <input type="hidden" name="next" value="${next}" />
      <label>Email <input type="email" name="email" value="${email}" required autofocus /></label>
      <label>Password <input type="password" name="password" required /></label>
      <button type="submit">Sign in</button>
    </form>`;
}

export function signInRoutes(
  scope: FastifyInstance,
  router: ConsoleRouter,
  failures: FailedSignIns,
): void {
  const { env } = router;
  const page = (reply: FastifyReply, status: number, body: ReturnType<typeof form>) =>
    reply
      .code(status)
      .type('text/html; charset=utf-8')
      .send(bareLayout(env.assets, 'Sign in', body).text);

  scope.get('/console/sign-in', { config: { auth: 'public' } }, async (req, reply) => {
    const next = safeNext((req.query as Record<string, unknown>).next);
    if (await router.sessionOf(req)) return reply.redirect(next, 303);
    return page(reply, 200, form(next));
  });

  scope.post('/console/sign-in', { config: { auth: 'public' } }, async (req, reply) => {
    checkSameOrigin(req, env.publicUrl);
    const body = (req.body ?? {}) as Record<string, unknown>;
    const email = typeof body.email === 'string' ? body.email : '';
    const password = typeof body.password === 'string' ? body.password : '';
    const next = safeNext(body.next);
    try {
      failures.check(req.ip);
      const api = new ConsoleApi(env.app, undefined, req.ip);
      const answer = await api.call<SignInAnswer>('POST', '/console/api/sign-in', {
        body: { email, password },
      });
      const maxAge = Math.floor((Date.parse(answer.expiresAt) - Date.now()) / 1000);
      setSessionCookie(reply, req, env.publicUrl, answer.token, maxAge);
      return reply.redirect(next, 303);
    } catch (err) {
      const refusal = asRefusal(err);
      if (!refusal) throw err;
      if (refusal.status === 401) failures.failed(req.ip);
      if (refusal.retryAfter) reply.header('retry-after', refusal.retryAfter);
      return page(reply, refusal.status, form(next, email, refusal));
    }
  });

  scope.post('/console/sign-out', { config: { auth: 'public' } }, (req, reply) =>
    signOut(router, req, reply),
  );
}

async function signOut(router: ConsoleRouter, req: FastifyRequest, reply: FastifyReply) {
  checkSameOrigin(req, router.env.publicUrl);
  const session = await router.sessionOf(req);
  if (session) {
    checkCsrf(req, session.token, ((req.body ?? {}) as Record<string, string>)._csrf);
    const api = new ConsoleApi(router.env.app, session.token, req.ip);
    await api.call('DELETE', `/v1/tokens/${encodeURIComponent(session.keyId)}`);
  }
  clearSessionCookie(reply, req, router.env.publicUrl);
  return reply.redirect('/console/sign-in', 303);
}
