/**
 * How console pages are declared. A page family (pages/<family>.ts) gets a router and
 * declares GET pages and POST actions on it; the router gives each handler the signed-in
 * session and a `/v1` caller, checks CSRF and origin on every action, and turns a route's
 * refusal into a page that shows its sentence and code (or, when the key has ended,
 * into a trip to the sign-in page).
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Readable } from 'node:stream';
import type { MeAnswer } from '../contracts/console.js';
import { ApiError } from '../errors/api-error.js';
import { ConsoleApi, Refusal } from './api.js';
import type { Assets } from './assets.js';
import type { Equivalent } from './equivalent.js';
import { html, type Html } from './html.js';
import { errorBox, layout, type NavEntry, type Viewer } from './layout.js';
import {
  checkCsrf,
  checkSameOrigin,
  clearSessionCookie,
  CSRF_FIELD,
  csrfTokenOf,
  sessionKeyOf,
} from './session.js';

/** The signed-in person, as `GET /console/api/me` says, with their key and CSRF token. */
export interface Session extends Viewer {
  token: string;
  keyId: string;
}

/** A full page in the console's layout. */
export interface View {
  title: string;
  /** The navigation entry to mark as current. */
  nav: string;
  body: Html;
  commands?: Equivalent[];
  scripts?: string[];
  styles?: string[];
  status?: number;
}

/**
 * What a handler answers: a page, a piece of one (htmx), a redirect (after a POST), or a
 * text that comes as it is made (a build's log followed).
 */
export type Outcome =
  | View
  | { fragment: Html; status?: number }
  | { redirect: string }
  | { stream: Readable; type: string };

export const redirect = (to: string): Outcome => ({ redirect: to });
export const fragment = (body: Html, status?: number): Outcome => ({ fragment: body, status });

export interface PageContext {
  req: FastifyRequest;
  reply: FastifyReply;
  session: Session;
  /** Calls `/v1` routes as the signed-in person. */
  api: ConsoleApi;
  params: Record<string, string>;
  query: Record<string, string>;
  /** The posted form (actions only). */
  form: Record<string, string>;
  assets: Assets;
  /** Whether htmx sent the request (it wants a fragment). */
  htmx: boolean;
}

export type Handler = (c: PageContext) => Promise<Outcome>;

/** What every router shares: the app to call, assets, navigation, the public URL. */
export interface ConsoleEnv {
  app: FastifyInstance;
  assets: Assets;
  nav: NavEntry[];
  publicUrl: string;
}

/** Only a path of the console itself may be a place to come back to. */
export function safeNext(next: unknown): string {
  return typeof next === 'string' && /^\/console(\/|\?|$)/.test(next) && !next.includes('//')
    ? next
    : '/console';
}

export function signInUrl(next: string): string {
  return `/console/sign-in?next=${encodeURIComponent(safeNext(next))}`;
}

function flat(record: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries((record ?? {}) as Record<string, unknown>)) {
    if (typeof v === 'string') out[k] = v;
    else if (Array.isArray(v) && typeof v[0] === 'string') out[k] = v[0];
  }
  return out;
}

export class ConsoleRouter {
  constructor(
    private readonly scope: FastifyInstance,
    readonly env: ConsoleEnv,
  ) {}

  /** A page for signed-in people; a signed-out visitor is sent to sign in, then back. */
  page(path: string, handler: Handler): void {
    this.scope.get(path, { config: { auth: 'public' } }, (req, reply) =>
      this.run(req, reply, handler, false),
    );
  }

  /** A state-changing form post (or htmx request): CSRF and origin are checked first. */
  action(path: string, handler: Handler): void {
    this.scope.post(path, { config: { auth: 'public' } }, (req, reply) =>
      this.run(req, reply, handler, true),
    );
  }

  /** Resolves the session of a request, or undefined when it has none (or it ended). */
  async sessionOf(req: FastifyRequest): Promise<Session | undefined> {
    const token = sessionKeyOf(req, this.env.publicUrl);
    if (!token) return undefined;
    const api = new ConsoleApi(this.env.app, token, req.ip);
    try {
      const me = await api.call<MeAnswer>('GET', '/console/api/me');
      return {
        token,
        keyId: me.key.id,
        email: me.user?.email ?? null,
        role: me.user?.role ?? null,
        org: me.org,
        csrf: csrfTokenOf(token),
      };
    } catch (err) {
      // Only an unknown, revoked or expired key is "signed out"; a suspended organization
      // (403) is a refusal the person should read, not a loop through the sign-in page.
      if (err instanceof Refusal && err.status === 401) return undefined;
      if (err instanceof Refusal && err.code === 'org-suspended')
        throw new ApiError('org-suspended');
      throw err;
    }
  }

  private async run(
    req: FastifyRequest,
    reply: FastifyReply,
    handler: Handler,
    changes: boolean,
  ): Promise<FastifyReply> {
    const htmx = req.headers['hx-request'] === 'true';
    const form = changes ? flat(req.body) : {};
    // Origin first: a cross-site post learns nothing, not even whether a session exists.
    if (changes) checkSameOrigin(req, this.env.publicUrl);
    const session = await this.sessionOf(req);
    if (!session) return this.toSignIn(req, reply, htmx);
    if (changes) checkCsrf(req, session.token, form[CSRF_FIELD]);
    const c: PageContext = {
      req,
      reply,
      session,
      api: new ConsoleApi(this.env.app, session.token, req.ip),
      params: flat(req.params),
      query: flat(req.query),
      form,
      assets: this.env.assets,
      htmx,
    };
    let outcome: Outcome;
    try {
      outcome = await handler(c);
    } catch (err) {
      if (err instanceof Refusal && err.status === 401) return this.toSignIn(req, reply, htmx);
      const refusal = asRefusal(err);
      if (!refusal) throw err;
      if (refusal.retryAfter) reply.header('retry-after', refusal.retryAfter);
      outcome = htmx
        ? fragment(errorBox(refusal), refusal.status)
        : {
            title: refusal.status === 404 ? 'Not found' : 'Refused',
            nav: '',
            status: refusal.status,
            body: html`${errorBox(refusal)}
              <p><a href="/console">Back to the console</a></p>`,
          };
    }
    return this.send(reply, session, outcome, htmx);
  }

  private send(reply: FastifyReply, session: Session, outcome: Outcome, htmx: boolean) {
    if ('redirect' in outcome) {
      // htmx follows a plain redirect with its own request; tell it to load the page.
      if (htmx) return reply.header('hx-redirect', outcome.redirect).code(204).send();
      return reply.redirect(outcome.redirect, 303);
    }
    if ('stream' in outcome) {
      // A reader who leaves lets go of the route's answer too.
      reply.raw.once('close', () => outcome.stream.destroy());
      return reply.type(outcome.type).send(outcome.stream);
    }
    reply.type('text/html; charset=utf-8');
    if ('fragment' in outcome) return reply.code(outcome.status ?? 200).send(outcome.fragment.text);
    const page = layout(this.env.assets, this.env.nav, session, outcome);
    return reply.code(outcome.status ?? 200).send(page.text);
  }

  private toSignIn(req: FastifyRequest, reply: FastifyReply, htmx: boolean) {
    clearSessionCookie(reply, req, this.env.publicUrl);
    // After a POST, come back to the page the form was on, not to the action.
    const back = req.method === 'GET' ? req.url : refererPath(req);
    const to = signInUrl(back);
    if (htmx) return reply.header('hx-redirect', to).code(204).send();
    return reply.redirect(to, 303);
  }
}

function refererPath(req: FastifyRequest): string {
  try {
    const u = new URL(req.headers.referer ?? '');
    return u.pathname + u.search;
  } catch {
    return '/console';
  }
}

/** A refusal to show: a route's, or the console's own (CSRF, rate limit). */
export function asRefusal(err: unknown): Refusal | undefined {
  if (err instanceof Refusal) return err;
  if (err instanceof ApiError) {
    return new Refusal(
      err.status,
      err.code,
      err.message,
      err.retryAfter === undefined ? undefined : String(err.retryAfter),
    );
  }
  return undefined;
}
