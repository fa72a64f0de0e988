import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';

let tp: TestPlatform;
let a: TestOrg;
let b: TestOrg;

beforeAll(async () => {
  tp = await startTestPlatform({ publicUrl: 'http://pier.test:8080' });
  a = await tp.createOrg();
  b = await tp.createOrg();
});
afterAll(async () => tp?.close());

const createApp = (token: string, name: unknown) =>
  tp.request('POST', '/v1/apps', { token, body: { name } });

describe('apps', () => {
  it('creates, lists, reads and deletes an app', async () => {
    const res = await createApp(a.token, 'shop');
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({
      name: 'shop',
      orgId: a.id,
      defaultAddress: 'http://shop.pier.test:8080',
    });
    expect(res.body.id).toMatch(/^app-/);
    expect(Date.parse(res.body.createdAt)).not.toBeNaN();
    expect(
      (await tp.request('GET', '/v1/apps', { token: a.token })).body.map(
        (x: { name: string }) => x.name,
      ),
    ).toContain('shop');
    expect((await tp.request('GET', '/v1/apps/shop', { token: a.token })).body).toEqual(res.body);
    expect((await tp.request('DELETE', '/v1/apps/shop', { token: a.token })).status).toBe(204);
    expect((await tp.request('GET', '/v1/apps/shop', { token: a.token })).status).toBe(404);
    expect((await tp.request('DELETE', '/v1/apps/shop', { token: a.token })).status).toBe(404);
  });

  it('shares one namespace across organizations', async () => {
    expect((await createApp(a.token, 'unique-name')).status).toBe(201);
    const same = await createApp(a.token, 'unique-name');
    expect(same.status).toBe(409);
    expect(same.body.code).toBe('name-taken');
    const elsewhere = await createApp(b.token, 'unique-name');
    expect(elsewhere.status).toBe(409);
    expect(elsewhere.body.code).toBe('name-taken');
    // Deleting frees the name for anyone.
    await tp.request('DELETE', '/v1/apps/unique-name', { token: a.token });
    expect((await createApp(b.token, 'unique-name')).status).toBe(201);
  });

  it('makes concurrent creates of one name have exactly one winner', async () => {
    const results = await Promise.all([a, b, a, b].map((o) => createApp(o.token, 'race-name')));
    expect(results.filter((r) => r.status === 201)).toHaveLength(1);
    expect(results.filter((r) => r.body.code === 'name-taken')).toHaveLength(3);
  });

  it('refuses reserved names', async () => {
    for (const name of ['api', 'console', 'docs', 'www', 'pier', 'pier-anything']) {
      const res = await createApp(a.token, name);
      expect(res.status, name).toBe(400);
      expect(res.body.code).toBe('name-reserved');
    }
  });

  it('validates names', async () => {
    for (const name of ['', 'A', 'has_underscore', '-lead', 'trail-', 'x'.repeat(64), 42, null]) {
      const res = await createApp(a.token, name);
      expect(res.status, String(name)).toBe(400);
      expect(res.body.code).toBe('bad-request');
      expect(res.body.issues[0].path).toBe('name');
    }
    expect((await createApp(a.token, 'x'.repeat(63))).status).toBe(201);
    expect(
      (await tp.request('POST', '/v1/apps', { token: a.token, body: {} })).body.issues,
    ).toEqual([{ path: 'name', message: 'is required' }]);
    const wrongType = await createApp(a.token, 42);
    expect(wrongType.body.issues[0].message).toContain('expected string');
  });

  it('answers org-limit-apps with limit and current', async () => {
    const c = await tp.createOrg();
    await tp.admin('PUT', `/admin/v1/orgs/${c.id}/limits`, { apps: 2 });
    expect((await createApp(c.token, 'lim-1')).status).toBe(201);
    expect((await createApp(c.token, 'lim-2')).status).toBe(201);
    const res = await createApp(c.token, 'lim-3');
    expect(res.status).toBe(403);
    expect(res.body).toMatchObject({ code: 'org-limit-apps', limit: 2, current: 2 });
    await tp.admin('PUT', `/admin/v1/orgs/${c.id}/limits`, { apps: null });
    expect((await createApp(c.token, 'lim-3')).status).toBe(201);
  });

  it("hides another organization's app", async () => {
    await createApp(a.token, 'a-private');
    for (const [method, path] of [
      ['GET', '/v1/apps/a-private'],
      ['DELETE', '/v1/apps/a-private'],
      ['GET', '/v1/apps/a-private/secrets'],
    ] as const) {
      const res = await tp.request(method, path, { token: b.token });
      expect(res.status, path).toBe(404);
      expect(res.body).toEqual({ error: "App 'a-private' not found.", code: 'not-found' });
    }
    expect(
      (await tp.request('GET', '/v1/apps', { token: b.token })).body.map(
        (x: { name: string }) => x.name,
      ),
    ).not.toContain('a-private');
  });
});
