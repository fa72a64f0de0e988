import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONSOLE_KEY_TTL_S } from '../../src/services/console-sign-in.js';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';

let tp: TestPlatform;
let org: TestOrg;
/** The platform's clock runs this far ahead of the real one. */
let offsetMs = 0;
const now = () => Date.now() + offsetMs;

const PASSWORD = 'a long enough password';
const EMAIL = 'Person@Example.com';

const signIn = (body: unknown) => tp.request('POST', '/console/api/sign-in', { body });

beforeAll(async () => {
  tp = await startTestPlatform({}, { clock: () => new Date(now()) });
  org = await tp.createOrg({ name: 'Console Org' });
  const user = await tp.admin('POST', `/admin/v1/orgs/${org.id}/users`, {
    email: EMAIL,
    password: PASSWORD,
    role: 'admin',
  });
  expect(user.status).toBe(201);
});
afterAll(async () => tp?.close());

describe('POST /console/api/sign-in', () => {
  it('answers a token that expires in about 12 hours', async () => {
    const before = now();
    const res = await signIn({ email: EMAIL, password: PASSWORD });
    const after = now();
    expect(res.status).toBe(200);
    expect(Object.keys(res.body).sort()).toEqual(['expiresAt', 'token']);
    expect(res.body.token).toEqual(expect.any(String));
    expect(CONSOLE_KEY_TTL_S).toBe(12 * 3600);
    const expiresAt = new Date(res.body.expiresAt).getTime();
    expect(expiresAt).toBeGreaterThanOrEqual(before + 12 * 3600 * 1000 - 1000);
    expect(expiresAt).toBeLessThanOrEqual(after + 12 * 3600 * 1000 + 1000);
  });

  it('gives a working full-access key of that person', async () => {
    const res = await signIn({ email: EMAIL, password: PASSWORD });
    const token = res.body.token as string;

    const tokens = await tp.request('GET', '/v1/tokens', { token });
    expect(tokens.status).toBe(200);
    expect(tokens.body.every((k: { orgId: string }) => k.orgId === org.id)).toBe(true);

    // Full access: it may create apps, read billing and mint keys.
    const app = await tp.request('POST', '/v1/apps', { token, body: { name: 'console-made' } });
    expect(app.status).toBe(201);
    expect(app.body.orgId).toBe(org.id);
    const credits = await tp.request('GET', '/v1/billing/credits', { token });
    expect(credits.status).toBe(200);
    expect(credits.body.orgId).toBe(org.id);
    const key = await tp.request('POST', '/v1/tokens', {
      token,
      body: { name: 'from the console', ttlSeconds: 3600 },
    });
    expect(key.status).toBe(201);
    expect(new Date(key.body.expiresAt).getTime()).toBeLessThanOrEqual(
      new Date(res.body.expiresAt).getTime(),
    );
    // ...but never one that outlives the console key itself.
    const forever = await tp.request('POST', '/v1/tokens', {
      token,
      body: { name: 'forever' },
    });
    expect(forever.status).toBe(400);
    expect(forever.body.code).toBe('bad-request');
  });

  it('signs in whatever the case of the email', async () => {
    const res = await signIn({ email: EMAIL.toLowerCase(), password: PASSWORD });
    expect(res.status).toBe(200);
    const upper = await signIn({ email: EMAIL.toUpperCase(), password: PASSWORD });
    expect(upper.status).toBe(200);
  });

  it('signs in a member as well', async () => {
    const user = await tp.admin('POST', `/admin/v1/orgs/${org.id}/users`, {
      email: 'member@example.com',
      password: 'member password!',
    });
    expect(user.status).toBe(201);
    const res = await signIn({ email: 'member@example.com', password: 'member password!' });
    expect(res.status).toBe(200);
    expect((await tp.request('GET', '/v1/apps', { token: res.body.token })).status).toBe(200);
  });

  it('answers 401 unauthenticated with the same sentence for a wrong password and an unknown email', async () => {
    const wrong = await signIn({ email: EMAIL, password: `${PASSWORD}!` });
    expect(wrong.status).toBe(401);
    expect(wrong.body.code).toBe('unauthenticated');
    expect(wrong.body.token).toBeUndefined();

    const unknown = await signIn({ email: 'nobody@example.com', password: PASSWORD });
    expect(unknown.status).toBe(401);
    expect(unknown.body.code).toBe('unauthenticated');
    expect(unknown.body.error).toBe(wrong.body.error);
    expect(unknown.body).toEqual(wrong.body);

    // A person without a console password cannot sign in at all.
    const noPassword = await tp.admin('POST', `/admin/v1/orgs/${org.id}/users`, {
      email: 'keyonly@example.com',
    });
    expect(noPassword.status).toBe(201);
    const none = await signIn({ email: 'keyonly@example.com', password: PASSWORD });
    expect(none.status).toBe(401);
    expect(none.body).toEqual(wrong.body);
  });

  it('stops working after its 12 hours', async () => {
    const res = await signIn({ email: EMAIL, password: PASSWORD });
    const token = res.body.token as string;
    expect((await tp.request('GET', '/v1/tokens', { token })).status).toBe(200);
    offsetMs += (CONSOLE_KEY_TTL_S + 1) * 1000;
    const late = await tp.request('GET', '/v1/tokens', { token });
    expect(late.status).toBe(401);
    expect(late.body.code).toBe('unauthenticated');
    // The org's own key is unaffected.
    expect((await tp.request('GET', '/v1/tokens', { token: org.token })).status).toBe(200);
  });

  it('refuses the key of a suspended organization', async () => {
    const other = await tp.createOrg();
    const user = await tp.admin('POST', `/admin/v1/orgs/${other.id}/users`, {
      email: 'suspended@example.com',
      password: 'suspended password',
    });
    expect(user.status).toBe(201);
    const res = await signIn({ email: 'suspended@example.com', password: 'suspended password' });
    expect(res.status).toBe(200);
    expect((await tp.admin('POST', `/admin/v1/orgs/${other.id}/suspend`)).status).toBe(200);
    const refused = await tp.request('GET', '/v1/tokens', { token: res.body.token });
    expect(refused.status).toBe(403);
    expect(refused.body.code).toBe('org-suspended');
  });

  it.each([
    [{}, ['email', 'password']],
    [{ email: EMAIL }, ['password']],
    [{ password: PASSWORD }, ['email']],
    [{ email: '', password: '' }, ['email', 'password']],
    [{ email: 5, password: true }, ['email', 'password']],
    [{ email: EMAIL, password: PASSWORD, remember: true }, ['remember']],
  ])('refuses the body %j with 400 bad-request', async (body, fields) => {
    const res = await signIn(body);
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('bad-request');
    expect(res.body.issues.map((i: { path: string }) => i.path).sort()).toEqual(fields);
    expect(res.body.token).toBeUndefined();
  });

  it('refuses a body that is not JSON', async () => {
    const res = await tp.request('POST', '/console/api/sign-in', { raw: 'email=a&password=b' });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('bad-request');
  });
});

describe('sign-in rate limit per address', () => {
  let fresh: TestPlatform;
  beforeAll(async () => {
    // A platform of its own: the sign-ins above count against the same address.
    fresh = await startTestPlatform();
    const o = await fresh.createOrg();
    const user = await fresh.admin('POST', `/admin/v1/orgs/${o.id}/users`, {
      email: 'limited@example.com',
      password: 'limited password',
    });
    expect(user.status).toBe(201);
  });
  afterAll(async () => fresh?.close());

  it('allows 30 attempts a minute, then 429 rate-limited with Retry-After, even with the right password', async () => {
    const attempts = Array.from({ length: 30 }, (_, i) =>
      fresh.request('POST', '/console/api/sign-in', {
        body: {
          email: 'limited@example.com',
          password: i === 0 ? 'limited password' : 'wrong password',
        },
      }),
    );
    const answers = await Promise.all(attempts);
    expect(answers.filter((a) => a.status === 200)).toHaveLength(1);
    expect(answers.filter((a) => a.status === 401)).toHaveLength(29);

    const over = await fresh.request('POST', '/console/api/sign-in', {
      body: { email: 'limited@example.com', password: 'limited password' },
    });
    expect(over.status).toBe(429);
    expect(over.body.code).toBe('rate-limited');
    expect(over.body.token).toBeUndefined();
    const retryAfter = Number(over.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
  });
});
