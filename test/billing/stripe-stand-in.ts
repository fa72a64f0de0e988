/**
 * A stand-in for the few Stripe endpoints pier uses, on loopback, for the real `stripe`
 * SDK to talk to (PIER_STRIPE_API_URL). Stripe itself cannot be reached from here; this
 * speaks its protocol: Bearer secret key, form-encoded bodies with bracketed keys,
 * Idempotency-Key replays, Stripe's error objects (a declined card is a 402
 * `card_error`), and events posted to pier signed with Stripe's scheme
 * (`Stripe-Signature: t=…,v1=HMAC-SHA256(secret, "t.payload")`).
 *
 * Endpoints: customers; checkout sessions (whose `url` is a payment page here: posting
 * its form pays, sends `checkout.session.completed` and redirects to `success_url`);
 * payment intents (off-session charges, and retrieval); billing portal sessions.
 */
import { createHmac, randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

type Obj = Record<string, any>;

export interface SentEvent {
  id: string;
  type: string;
  payload: string;
  status: number;
}

export interface StripeStandIn {
  url: string;
  secretKey: string;
  webhookSecret: string;
  /** Where events go: pier's POST /v1/billing/stripe/events. */
  eventsUrl: string | undefined;
  /** Off-session charges are declined while this is true. */
  declineCharges: boolean;
  /** Checkout sessions are refused (400 invalid_request_error) while this is true. */
  refuseCheckouts: boolean;
  customers: Map<string, Obj>;
  sessions: Map<string, Obj>;
  intents: Map<string, Obj>;
  portals: Map<string, Obj>;
  events: SentEvent[];
  /** Pays a checkout session as the payment page's button does. */
  pay(sessionId: string): Promise<void>;
  /** Posts an event's exact payload again, freshly signed (a provider's retry). */
  resend(eventId: string): Promise<number>;
  /** Holds off-session charges unanswered until the returned function is called. */
  holdCharges(): () => void;
  /** How many charges are being held. */
  heldCharges(): number;
  /** Off-session charge requests received, repeats of one idempotency key included. */
  chargeRequests: number;
  /** Posts any payload with any signature header. */
  post(payload: string, signature: string | undefined): Promise<number>;
  sign(payload: string, secret?: string, at?: number): string;
  close(): Promise<void>;
}

const id = (prefix: string) => `${prefix}_${randomBytes(12).toString('hex')}`;

/** Parses Stripe's form encoding (`a[b][0][c]=v`) into nested objects. */
export function parseStripeForm(body: string): Obj {
  const out: Obj = {};
  for (const [key, value] of new URLSearchParams(body)) {
    const parts = key.replace(/\]/g, '').split('[');
    let node = out;
    parts.forEach((p, i) => {
      if (i === parts.length - 1) node[p] = value;
      else node = node[p] ??= {};
    });
  }
  return out;
}

function stripeError(status: number, type: string, message: string, extra: Obj = {}) {
  return { status, body: { error: { type, message, ...extra } } };
}

export async function startStripeStandIn(): Promise<StripeStandIn> {
  const secretKey = `sk_test_${randomBytes(12).toString('hex')}`;
  const webhookSecret = `whsec_${randomBytes(16).toString('hex')}`;
  type Answer = { status: number; body: unknown };
  // Answers by idempotency key; a request repeated while the first is in flight waits
  // for the first's answer (as Stripe does, it never runs twice).
  const idempotent = new Map<string, Promise<Answer>>();
  let hold: Promise<void> | undefined;
  let held = 0;

  const s: StripeStandIn = {
    url: '',
    secretKey,
    webhookSecret,
    eventsUrl: undefined,
    declineCharges: false,
    refuseCheckouts: false,
    customers: new Map(),
    sessions: new Map(),
    intents: new Map(),
    portals: new Map(),
    events: [],
    sign(payload, secret = webhookSecret, at = Math.floor(Date.now() / 1000)) {
      const v1 = createHmac('sha256', secret).update(`${at}.${payload}`).digest('hex');
      return `t=${at},v1=${v1}`;
    },
    async post(payload, signature) {
      if (!s.eventsUrl) throw new Error('the stand-in has no events URL');
      const res = await fetch(s.eventsUrl, {
        method: 'POST',
        headers: {
          'content-type': 'application/json; charset=utf-8',
          ...(signature ? { 'stripe-signature': signature } : {}),
        },
        body: payload,
      });
      await res.arrayBuffer();
      return res.status;
    },
    async resend(eventId) {
      const e = s.events.find((x) => x.id === eventId);
      if (!e) throw new Error(`no event ${eventId}`);
      return s.post(e.payload, s.sign(e.payload));
    },
    async pay(sessionId) {
      const session = s.sessions.get(sessionId);
      if (!session) throw new Error(`no session ${sessionId}`);
      if (session.status === 'complete') return;
      const pm = id('pm');
      const pi = intent({
        amount: session.amount_total,
        customer: session.customer,
        payment_method: pm,
        metadata: session.payment_intent_data?.metadata ?? {},
        status: 'succeeded',
      });
      Object.assign(session, { status: 'complete', payment_status: 'paid', payment_intent: pi.id });
      await emit('checkout.session.completed', session);
    },
    holdCharges() {
      let release!: () => void;
      hold = new Promise<void>((r) => (release = r));
      return () => {
        hold = undefined;
        release();
      };
    },
    heldCharges: () => held,
    chargeRequests: 0,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };

  function intent(fields: Obj): Obj {
    const pi = {
      id: id('pi'),
      object: 'payment_intent',
      currency: 'eur',
      created: Math.floor(Date.now() / 1000),
      livemode: false,
      ...fields,
    };
    s.intents.set(pi.id, pi);
    return pi;
  }

  async function emit(type: string, object: Obj): Promise<void> {
    const event = {
      id: id('evt'),
      object: 'event',
      api_version: '2025-01-27.acacia',
      created: Math.floor(Date.now() / 1000),
      livemode: false,
      pending_webhooks: 1,
      request: { id: null, idempotency_key: null },
      type,
      data: { object: structuredClone(object) },
    };
    const payload = JSON.stringify(event, null, 2);
    const sent: SentEvent = { id: event.id, type, payload, status: 0 };
    s.events.push(sent);
    sent.status = await s.post(payload, s.sign(payload));
  }

  /** The API: answers as Stripe would, or undefined for a path it does not know. */
  function api(method: string, path: string, body: Obj): { status: number; body: unknown } {
    const base = s.url;
    if (method === 'POST' && path === '/v1/customers') {
      const c = {
        id: id('cus'),
        object: 'customer',
        name: body.name,
        metadata: body.metadata ?? {},
      };
      s.customers.set(c.id, c);
      return { status: 200, body: c };
    }
    if (method === 'POST' && path === '/v1/checkout/sessions') {
      if (s.refuseCheckouts) {
        return stripeError(400, 'invalid_request_error', 'Checkout is not enabled');
      }
      if (!s.customers.has(body.customer))
        return stripeError(400, 'invalid_request_error', `No such customer: '${body.customer}'`);
      const line = body.line_items?.['0'];
      const sid = id('cs_test');
      const session = {
        id: sid,
        object: 'checkout.session',
        mode: body.mode,
        customer: body.customer,
        client_reference_id: body.client_reference_id ?? null,
        currency: line?.price_data?.currency,
        amount_total: Number(line?.price_data?.unit_amount) * Number(line?.quantity ?? 1),
        metadata: body.metadata ?? {},
        payment_intent_data: body.payment_intent_data ?? {},
        payment_intent: null,
        payment_status: 'unpaid',
        status: 'open',
        success_url: body.success_url,
        cancel_url: body.cancel_url,
        url: `${base}/pay/${sid}`,
      };
      s.sessions.set(sid, session);
      return { status: 200, body: session };
    }
    const piMatch = /^\/v1\/payment_intents\/([^/]+)$/.exec(path);
    if (method === 'GET' && piMatch) {
      const pi = s.intents.get(piMatch[1]!);
      return pi
        ? { status: 200, body: pi }
        : stripeError(404, 'invalid_request_error', 'No such payment_intent');
    }
    if (method === 'POST' && path === '/v1/payment_intents') {
      const customer = s.customers.get(body.customer);
      if (!customer) return stripeError(400, 'invalid_request_error', 'No such customer');
      const fields = {
        amount: Number(body.amount),
        customer: body.customer,
        payment_method: body.payment_method,
        metadata: body.metadata ?? {},
        off_session: body.off_session === 'true',
      };
      if (s.declineCharges) {
        const pi = intent({ ...fields, status: 'requires_payment_method' });
        return stripeError(402, 'card_error', 'Your card was declined.', {
          code: 'card_declined',
          decline_code: 'generic_decline',
          payment_intent: pi,
        });
      }
      const pi = intent({ ...fields, status: 'succeeded' });
      // Stripe tells the account too; pier settles the top-up once whoever is first.
      void emit('payment_intent.succeeded', pi).catch(() => undefined);
      return { status: 200, body: pi };
    }
    if (method === 'POST' && path === '/v1/billing_portal/sessions') {
      if (!s.customers.has(body.customer))
        return stripeError(400, 'invalid_request_error', 'No such customer');
      const ps = {
        id: id('bps'),
        object: 'billing_portal.session',
        customer: body.customer,
        return_url: body.return_url,
        url: '',
      };
      ps.url = `${base}/portal/${ps.id}`;
      s.portals.set(ps.id, ps);
      return { status: 200, body: ps };
    }
    return stripeError(
      404,
      'invalid_request_error',
      `Unrecognized request URL (${method}: ${path})`,
    );
  }

  /** The payment page a checkout session's `url` shows, and its pay button's post. */
  async function page(req: http.IncomingMessage, res: http.ServerResponse, path: string) {
    const pay = /^\/pay\/([^/]+)$/.exec(path);
    const session = pay ? s.sessions.get(pay[1]!) : undefined;
    if (!session) {
      res.writeHead(404).end('no such page');
      return;
    }
    if (req.method === 'POST') {
      await s.pay(session.id);
      res.writeHead(303, { location: session.success_url }).end();
      return;
    }
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(`<!doctype html>
<title>Stand-in checkout</title>
<h1>Pay €${(session.amount_total / 100).toFixed(2)}</h1>
<form method="post" action="/pay/${session.id}"><button id="pay" type="submit">Pay</button></form>
<a id="cancel" href="${session.cancel_url}">Cancel</a>`);
  }

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      void (async () => {
        const url = new URL(req.url ?? '/', 'http://stand-in');
        if (!url.pathname.startsWith('/v1/')) return page(req, res, url.pathname);
        const send = (a: { status: number; body: unknown }) =>
          res
            .writeHead(a.status, { 'content-type': 'application/json', 'request-id': id('req') })
            .end(JSON.stringify(a.body));
        if (req.headers.authorization !== `Bearer ${secretKey}`) {
          return send(stripeError(401, 'invalid_request_error', 'Invalid API Key provided'));
        }
        if (req.method === 'POST' && url.pathname === '/v1/payment_intents') s.chargeRequests++;
        const key = req.headers['idempotency-key'];
        const memo = typeof key === 'string' ? `${req.method} ${url.pathname} ${key}` : undefined;
        const seen = memo ? idempotent.get(memo) : undefined;
        if (seen) return send(await seen);
        const answer = (async () => {
          if (hold && req.method === 'POST' && url.pathname === '/v1/payment_intents') {
            held++;
            await hold;
            held--;
          }
          return api(
            req.method ?? 'GET',
            url.pathname,
            parseStripeForm(Buffer.concat(chunks).toString()),
          );
        })();
        if (memo) idempotent.set(memo, answer);
        send(await answer);
      })().catch((err: unknown) => {
        res.writeHead(500).end(String(err));
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  s.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return s;
}
