/**
 * The webhook routes (spec 4.11) and the operator's mail events (CONTRACT 2) as an
 * attacker would try them: bodies, SSRF targets, other organizations, weak keys, agents.
 * Private targets are not allowed here; only the receiver's port is trusted.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SecretBox, loadMasterKey } from '../../src/crypto/secret-box.js';
import type { ResolvedAddress } from '../../src/host/outbound-guard.js';
import { secretBinding } from '../../src/services/webhooks/records.js';
import { MAX_WEBHOOKS_PER_ORG } from '../../src/services/webhooks/webhooks.js';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';
import { startReceiver, type Receiver } from './receiver.js';

/** Names the tests resolve without DNS. */
const NAMES: Record<string, string> = {
  'hooks.public.test': '93.184.216.34',
  'intranet.test': '10.20.30.40',
  'metadata.test': '169.254.169.254',
};
async function resolve(name: string): Promise<ResolvedAddress[]> {
  const address = NAMES[name];
  if (!address)
    throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${name}`), { code: 'ENOTFOUND' });
  return [{ address, family: 4 }];
}

let tp: TestPlatform;
let org: TestOrg;
let other: TestOrg;
let receiver: Receiver;

beforeAll(async () => {
  receiver = await startReceiver();
  tp = await startTestPlatform({ trustedRegistries: [`127.0.0.1:${receiver.port}`] }, { resolve });
  org = await tp.createOrg();
  other = await tp.createOrg();
});
afterAll(async () => {
  await tp?.close();
  await receiver?.close();
});

const create = (body: unknown, token = org.token) =>
  tp.request('POST', '/v1/webhooks', { token, body });

async function newKey(body: Record<string, unknown>): Promise<string> {
  const res = await tp.request('POST', '/v1/tokens', { token: org.token, body });
  expect(res.status).toBe(201);
  return res.body.token;
}

describe('webhooks', () => {
  it('creates a webhook, shows its secret once and keeps it sealed', async () => {
    const res = await create({
      url: `${receiver.url}/ok/a`,
      events: ['email.sent', 'email.bounced'],
    });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      id: expect.stringMatching(/^wh-/),
      url: `${receiver.url}/ok/a`,
      events: ['email.sent', 'email.bounced'],
      enabled: true,
      createdAt: expect.any(String),
      secret: expect.stringMatching(/^whsec_[A-Za-z0-9+/]{32}$/),
    });
    const { id, secret } = res.body;

    const got = await tp.request('GET', `/v1/webhooks/${id}`, { token: org.token });
    expect(got.status).toBe(200);
    expect(got.body.secret).toBeUndefined();
    const { secret: _s, ...record } = res.body;
    expect(got.body).toEqual(record);
    const list = await tp.request('GET', '/v1/webhooks', { token: org.token });
    expect(list.body).toContainEqual(record);
    expect(JSON.stringify(list.body)).not.toContain(secret);

    const { rows } = await tp.platform.store.pool.query(
      'SELECT secret_nonce, secret_ciphertext FROM webhooks WHERE id = $1',
      [id],
    );
    const sealed = { nonce: rows[0].secret_nonce, ciphertext: rows[0].secret_ciphertext };
    expect(sealed.ciphertext.toString('latin1')).not.toContain(secret.slice(6));
    const box = new SecretBox(await loadMasterKey(tp.dataDir));
    expect(box.open(sealed, secretBinding(id))).toBe(secret);
    expect(() => box.open(sealed, secretBinding('wh-other'))).toThrow();

    expect((await tp.request('DELETE', `/v1/webhooks/${id}`, { token: org.token })).status).toBe(
      204,
    );
    const again = await tp.request('GET', `/v1/webhooks/${id}`, { token: org.token });
    expect(again.status).toBe(404);
    expect(again.body.code).toBe('not-found');
    expect((await tp.request('DELETE', `/v1/webhooks/${id}`, { token: org.token })).status).toBe(
      404,
    );
  });

  it('reports every problem of a body at once, the refused URL included', async () => {
    const res = await create({ url: 'http://127.0.0.1:9/x', events: ['email.opened'], extra: 1 });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('bad-request');
    const paths = res.body.issues.map((i: { path: string }) => i.path).sort();
    expect(paths).toEqual(['events.0', 'extra', 'url']);
    expect(res.body.issues.find((i: { path: string }) => i.path === 'url').message).toMatch(
      /loopback/,
    );

    for (const [body, path] of [
      [{}, 'url'],
      [{ url: 'x'.repeat(10) }, 'url'],
      [{ url: `http://a.test/${'x'.repeat(2048)}`, events: ['email.sent'] }, 'url'],
      [{ url: 'ftp://hooks.public.test/', events: ['email.sent'] }, 'url'],
      [{ url: `${receiver.url}/ok`, events: [] }, 'events'],
      [{ url: `${receiver.url}/ok` }, 'events'],
      [{ url: `${receiver.url}/ok`, events: 'email.sent' }, 'events'],
    ] as const) {
      const bad = await create(body);
      expect(bad.status, JSON.stringify(body)).toBe(400);
      expect(bad.body.issues.map((i: { path: string }) => i.path)).toContain(path);
    }
    const raw = await tp.request('POST', '/v1/webhooks', { token: org.token, raw: '{"url":' });
    expect(raw.status).toBe(400);
    expect(raw.body.code).toBe('bad-request');
  });

  it('refuses loopback, private and metadata targets unless private targets are allowed', async () => {
    for (const url of [
      'http://127.0.0.1:8080/hook',
      'http://localhost.:80/',
      'http://[::1]/hook',
      'http://10.0.0.5/hook',
      'http://192.168.1.1/hook',
      'http://169.254.169.254/latest/meta-data/',
      'http://[::ffff:127.0.0.1]/',
      'http://intranet.test/hook',
      'http://metadata.test/hook',
      `http://127.0.0.1:${receiver.port + 1}/other-port`,
    ]) {
      const res = await create({ url, events: ['email.sent'] });
      expect(res.status, url).toBe(400);
      expect(res.body.issues, url).toEqual([{ path: 'url', message: expect.any(String) }]);
    }
    const metadata = await create({ url: 'http://metadata.test/', events: ['email.sent'] });
    expect(metadata.body.issues[0].message).toMatch(/metadata/);
    const unknown = await create({ url: 'https://nowhere.test/', events: ['email.sent'] });
    expect(unknown.body.issues[0].message).toMatch(/does not resolve/);
    // A public name passes (nothing is sent to it here).
    const ok = await create({ url: 'https://hooks.public.test/in', events: ['email.failed'] });
    expect(ok.status).toBe(201);
  });

  it("answers another organization's webhook exactly like a missing one", async () => {
    const mine = await create({ url: `${receiver.url}/ok/mine`, events: ['email.sent'] });
    const id = mine.body.id;
    for (const [method, path] of [
      ['GET', `/v1/webhooks/${id}`],
      ['GET', `/v1/webhooks/${id}/deliveries`],
      ['DELETE', `/v1/webhooks/${id}`],
    ] as const) {
      const theirs = await tp.request(method, path, { token: other.token });
      const missing = await tp.request(method, path.replace(id, 'wh-doesnotexist0000'), {
        token: org.token,
      });
      expect(theirs.status, path).toBe(404);
      expect(theirs.body.code).toBe('not-found');
      expect(theirs.body.error.replace(id, 'X')).toBe(
        missing.body.error.replace('wh-doesnotexist0000', 'X'),
      );
    }
    const list = await tp.request('GET', '/v1/webhooks', { token: other.token });
    expect(list.body.map((w: { id: string }) => w.id)).not.toContain(id);
    expect((await tp.request('GET', `/v1/webhooks/${id}`, { token: org.token })).status).toBe(200);
  });

  it('lets a read-only key list but not create or delete', async () => {
    const hook = await create({ url: `${receiver.url}/ok/ro`, events: ['email.sent'] });
    const read = await newKey({ name: 'reader', scopes: ['read'] });
    expect((await tp.request('GET', '/v1/webhooks', { token: read })).status).toBe(200);
    expect((await tp.request('GET', `/v1/webhooks/${hook.body.id}`, { token: read })).status).toBe(
      200,
    );
    const deliveries = await tp.request('GET', `/v1/webhooks/${hook.body.id}/deliveries`, {
      token: read,
    });
    expect(deliveries.status).toBe(200);
    const refused = await create({ url: `${receiver.url}/ok/ro2`, events: ['email.sent'] }, read);
    expect(refused.status).toBe(403);
    expect(refused.body.code).toBe('token-scope');
    const del = await tp.request('DELETE', `/v1/webhooks/${hook.body.id}`, { token: read });
    expect(del.body.code).toBe('token-scope');
    const deploy = await newKey({ name: 'deployer', scopes: ['deploy'] });
    expect((await tp.request('GET', '/v1/webhooks', { token: deploy })).body.code).toBe(
      'token-scope',
    );
    expect((await tp.request('GET', '/v1/webhooks')).status).toBe(401);
  });

  it('judges agent tokens by the spec rows (F A0, R AA, R AD)', async () => {
    const hook = await create({ url: `${receiver.url}/ok/agents`, events: ['email.sent'] });
    const deliveries = `/v1/webhooks/${hook.body.id}/deliveries`;
    const sandbox = await newKey({ name: 'a', agent: { class: 'sandbox' } });
    expect((await tp.request('GET', '/v1/webhooks', { token: sandbox })).status).toBe(200);
    expect((await tp.request('GET', deliveries, { token: sandbox })).status).toBe(200);
    const made = await create({ url: `${receiver.url}/ok/x`, events: ['email.sent'] }, sandbox);
    expect(made.body.code).toBe('agent-token-credential');
    const del = await tp.request('DELETE', `/v1/webhooks/${hook.body.id}`, { token: sandbox });
    expect(del.body.code).toBe('agent-token-credential');

    const prod = await newKey({ name: 'p', agent: { class: 'production' } });
    expect((await tp.request('GET', `/v1/webhooks/${hook.body.id}`, { token: prod })).status).toBe(
      200,
    );
    const held = await tp.request('GET', deliveries, { token: prod });
    expect(held.status).toBe(403);
    expect(held.body.code).toBe('agent-token-production-data');
    const reader = await newKey({ name: 'pr', agent: { class: 'production', prodDataRead: true } });
    expect((await tp.request('GET', deliveries, { token: reader })).status).toBe(200);

    // Webhooks concern no app: a token limited to some apps is kept off them.
    await tp.request('POST', '/v1/apps', { token: org.token, body: { name: 'hook-app' } });
    const scoped = await newKey({ name: 's', agent: { class: 'sandbox', apps: ['hook-app'] } });
    expect((await tp.request('GET', '/v1/webhooks', { token: scoped })).body.code).toBe(
      'agent-token-app-scope',
    );
    // Every judged request is audited.
    const audit = await tp.request('GET', '/v1/agent-actions', { token: org.token });
    expect(JSON.stringify(audit.body)).toContain('/v1/webhooks');
  });

  it(`keeps an organization to ${MAX_WEBHOOKS_PER_ORG} webhooks`, async () => {
    const fresh = await tp.createOrg();
    const made = await Promise.all(
      Array.from({ length: MAX_WEBHOOKS_PER_ORG + 3 }, (_, i) =>
        create({ url: `${receiver.url}/ok/n${i}`, events: ['email.sent'] }, fresh.token),
      ),
    );
    expect(made.filter((r) => r.status === 201)).toHaveLength(MAX_WEBHOOKS_PER_ORG);
    const refused = made.filter((r) => r.status !== 201);
    expect(refused.map((r) => r.status)).toEqual([403, 403, 403]);
    expect(refused[0]!.body).toMatchObject({
      code: 'org-limit-webhooks',
      limit: MAX_WEBHOOKS_PER_ORG,
      current: MAX_WEBHOOKS_PER_ORG,
    });
  });

  it('takes mail events from the operator only, for known kinds and organizations', async () => {
    const path = `/admin/v1/orgs/${other.id}/mail-events`;
    const ok = await tp.admin('POST', path, { kind: 'email.delivered', data: { to: 'a@b.test' } });
    expect(ok.status).toBe(202);
    expect(ok.body).toEqual({
      id: expect.stringMatching(/^evt-/),
      kind: 'email.delivered',
      createdAt: expect.any(String),
      deliveries: 0,
    });
    const bad = await tp.admin('POST', path, { kind: 'email.opened', data: 'x', more: 1 });
    expect(bad.status).toBe(400);
    expect(bad.body.issues.map((i: { path: string }) => i.path).sort()).toEqual([
      'data',
      'kind',
      'more',
    ]);
    const missing = await tp.admin('POST', '/admin/v1/orgs/org-nope/mail-events', {
      kind: 'email.sent',
      data: {},
    });
    expect(missing.status).toBe(404);
    const customer = await tp.request('POST', path, {
      token: other.token,
      body: { kind: 'email.sent', data: {} },
    });
    expect(customer.status).toBe(401);
  });
});
