import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';

let offsetMs = 0;
let tp: TestPlatform;
let org: TestOrg;
let other: TestOrg;

beforeAll(async () => {
  tp = await startTestPlatform({}, { clock: () => new Date(Date.now() + offsetMs) });
  org = await tp.createOrg();
  other = await tp.createOrg();
});
afterAll(async () => tp?.close());

const create = (token: string, body: unknown) => tp.request('POST', '/v1/tokens', { token, body });

describe('API keys', () => {
  it('creates a key whose value is shown once and stored only as a hash', async () => {
    const res = await create(org.token, { name: 'ci', scopes: ['read'] });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ name: 'ci', scopes: ['read'] });
    expect(res.body.id).toMatch(/^tok-/);
    expect(res.body.token).toMatch(/^pier_[0-9A-Za-z]{43}$/);
    expect(res.body.token.startsWith(res.body.prefix)).toBe(true);
    const list = await tp.request('GET', '/v1/tokens', { token: org.token });
    const listed = list.body.find((k: { id: string }) => k.id === res.body.id);
    expect(listed).toMatchObject({
      id: res.body.id,
      orgId: org.id,
      userId: org.userId,
      name: 'ci',
      scopes: ['read'],
    });
    expect(listed.token).toBeUndefined();
    expect(JSON.stringify(list.body)).not.toContain(res.body.token);
    const { rows } = await tp.platform.store.pool.query(
      'SELECT hash, prefix FROM api_keys WHERE id = $1',
      [res.body.id],
    );
    expect(rows[0].hash).toHaveLength(32);
    expect(JSON.stringify(rows)).not.toContain(res.body.token);
  });

  it('refuses a revoked key at once, and a second revocation is a 404', async () => {
    const key = (await create(org.token, { name: 'temp' })).body;
    expect((await tp.request('GET', '/v1/tokens', { token: key.token })).status).toBe(200);
    const del = await tp.request('DELETE', `/v1/tokens/${key.id}`, { token: org.token });
    expect(del.status).toBe(204);
    const after = await tp.request('GET', '/v1/tokens', { token: key.token });
    expect(after.status).toBe(401);
    expect(after.body.code).toBe('unauthenticated');
    expect(
      (await tp.request('DELETE', `/v1/tokens/${key.id}`, { token: org.token })).body.code,
    ).toBe('not-found');
  });

  it('expires keys by ttlSeconds and by expiresAt, and marks them expired in the list', async () => {
    const ttl = (await create(org.token, { name: 'short', ttlSeconds: 60 })).body;
    const at = new Date(Date.now() + offsetMs + 120_000).toISOString();
    const dated = (await create(org.token, { name: 'dated', expiresAt: at })).body;
    expect(dated.expiresAt).toBe(at);
    expect(Date.parse(ttl.expiresAt) - Date.now()).toBeGreaterThan(55_000);
    expect((await tp.request('GET', '/v1/tokens', { token: ttl.token })).status).toBe(200);
    offsetMs += 61_000;
    try {
      const res = await tp.request('GET', '/v1/tokens', { token: ttl.token });
      expect(res.status).toBe(401);
      expect((await tp.request('GET', '/v1/tokens', { token: dated.token })).status).toBe(200);
      const list = (await tp.request('GET', '/v1/tokens', { token: org.token })).body;
      expect(list.find((k: { id: string }) => k.id === ttl.id).expired).toBe(true);
      expect(list.find((k: { id: string }) => k.id === dated.id).expired).toBe(false);
      offsetMs += 61_000;
      expect((await tp.request('GET', '/v1/tokens', { token: dated.token })).status).toBe(401);
    } finally {
      offsetMs = 0;
    }
  });

  it('refuses a key that would outlast the key that creates it', async () => {
    const parent = (await create(org.token, { name: 'parent', ttlSeconds: 300 })).body;
    for (const body of [
      { name: 'child', ttlSeconds: 3600 },
      { name: 'child', expiresAt: new Date(Date.now() + 3_600_000).toISOString() },
      { name: 'child' },
    ]) {
      const res = await create(parent.token, body);
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('bad-request');
      expect(res.body.error).toContain('outlast');
    }
    expect((await create(parent.token, { name: 'child', ttlSeconds: 120 })).status).toBe(201);
  });

  it('reports every wrong field of a body at once', async () => {
    const res = await create(org.token, {
      name: '',
      scopes: ['read', 'write'],
      ttlSeconds: 59,
      agent: { class: 'robot' },
      extra: 1,
    });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('bad-request');
    const paths = res.body.issues.map((i: { path: string }) => i.path);
    expect(paths).toEqual(
      expect.arrayContaining(['name', 'scopes.1', 'ttlSeconds', 'agent.class', 'extra']),
    );
    for (const p of ['name', 'scopes.1', 'ttlSeconds', 'agent.class'])
      expect(res.body.error).toContain(p);
  });

  it('enforces the bounds of spec part 8', async () => {
    const cases: [unknown, string][] = [
      [{ name: 'x'.repeat(121) }, 'name'],
      [{ name: 'x', scopes: Array.from({ length: 21 }, () => 'read') }, 'scopes'],
      [{ name: 'x', ttlSeconds: 31_536_001 }, 'ttlSeconds'],
      [
        { name: 'x', ttlSeconds: 60, expiresAt: new Date(Date.now() + 100_000).toISOString() },
        'ttlSeconds',
      ],
      [{ name: 'x', expiresAt: new Date(Date.now() - 1000).toISOString() }, 'expiresAt'],
      [{ name: 'x', agent: { class: 'sandbox', apps: [] } }, 'agent.apps'],
      [
        {
          name: 'x',
          agent: { class: 'sandbox', apps: Array.from({ length: 51 }, (_, i) => `a${i}`) },
        },
        'agent.apps',
      ],
      [{ name: 'x', agent: { class: 'twin', prodDataRead: true } }, 'agent.prodDataRead'],
      [{ name: 'x', scopes: ['deploy:Bad_App'] }, 'scopes.0'],
      [{ name: 'x', scopes: ['mail:send:not a domain'] }, 'scopes.0'],
    ];
    for (const [body, path] of cases) {
      const res = await create(org.token, body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.issues.map((i: { path: string }) => i.path)).toContain(path);
    }
    for (const scopes of [['read', 'deploy', 'deploy:web', 'mail:send', 'mail:send:example.com']]) {
      expect((await create(org.token, { name: 'ok', scopes })).status).toBe(201);
    }
  });

  it('answers 401 without a key or with a malformed one', async () => {
    const cases: Record<string, string>[] = [
      {},
      { authorization: 'Bearer' },
      { authorization: 'Basic abc' },
      { authorization: 'Bearer pier_nope' },
    ];
    for (const headers of cases) {
      const res = await tp.request('GET', '/v1/tokens', { headers });
      expect(res.status).toBe(401);
      expect(res.body).toMatchObject({ code: 'unauthenticated' });
      expect(typeof res.body.error).toBe('string');
    }
  });
});

describe('scopes', () => {
  it('keeps a scoped key off full-access routes, naming what is needed', async () => {
    const read = (await create(org.token, { name: 'reader', scopes: ['read'] })).body.token;
    for (const [method, path] of [
      ['GET', '/v1/tokens'],
      ['POST', '/v1/tokens'],
      ['GET', '/v1/ssh-keys'],
      ['GET', '/v1/billing/credits'],
    ] as const) {
      const res = await tp.request(method, path, {
        token: read,
        body: method === 'POST' ? { name: 'x' } : undefined,
      });
      expect(res.status, path).toBe(403);
      expect(res.body.code).toBe('token-scope');
      expect(res.body.error).toContain('full-access');
    }
    expect((await tp.request('GET', '/v1/apps', { token: read })).status).toBe(200);
  });

  it('lets deploy:<app> reach that app only', async () => {
    await tp.request('POST', '/v1/apps', { token: org.token, body: { name: 'scope-web' } });
    await tp.request('POST', '/v1/apps', { token: org.token, body: { name: 'scope-api' } });
    const deploy = (await create(org.token, { name: 'deployer', scopes: ['deploy:scope-web'] }))
      .body.token;
    const ok = await tp.request('PUT', '/v1/apps/scope-web/secrets', {
      token: deploy,
      body: { secrets: { A: '1' } },
    });
    expect(ok.status).toBe(200);
    const refused = await tp.request('PUT', '/v1/apps/scope-api/secrets', {
      token: deploy,
      body: { secrets: { A: '1' } },
    });
    expect(refused.status).toBe(403);
    expect(refused.body.code).toBe('token-scope');
    expect(refused.body.error).toContain('deploy:scope-api');
    // D-or-R: listing secrets works with deploy for its app; creating apps needs full access.
    expect((await tp.request('GET', '/v1/apps/scope-web/secrets', { token: deploy })).status).toBe(
      200,
    );
    expect(
      (await tp.request('POST', '/v1/apps', { token: deploy, body: { name: 'nope' } })).body.code,
    ).toBe('token-scope');
  });
});

describe('another organization', () => {
  it("answers another org's objects exactly like missing ones", async () => {
    await tp.request('POST', '/v1/apps', { token: org.token, body: { name: 'mine-only' } });
    const key = (await create(org.token, { name: 'private' })).body;

    const theirs = await tp.request('GET', '/v1/apps/mine-only', { token: other.token });
    await tp.request('DELETE', '/v1/apps/mine-only', { token: org.token });
    const missing = await tp.request('GET', '/v1/apps/mine-only', { token: org.token });
    expect(theirs.status).toBe(404);
    expect(theirs.body).toEqual(missing.body);

    const revokeTheirs = await tp.request('DELETE', `/v1/tokens/${key.id}`, { token: other.token });
    const revokeMissing = await tp.request('DELETE', '/v1/tokens/tok-doesnotexist00', {
      token: other.token,
    });
    expect(revokeTheirs.status).toBe(404);
    expect(revokeTheirs.body).toEqual(revokeMissing.body);
    expect((await tp.request('GET', '/v1/tokens', { token: key.token })).status).toBe(200);

    const listed = (await tp.request('GET', '/v1/tokens', { token: other.token })).body;
    expect(listed.every((k: { orgId: string }) => k.orgId === other.id)).toBe(true);
  });
});
