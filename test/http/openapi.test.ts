import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.js';

let tp: TestPlatform;
beforeAll(async () => {
  tp = await startTestPlatform();
});
afterAll(async () => tp?.close());

const implemented: [string, string][] = [
  ['post', '/v1/tokens'],
  ['get', '/v1/tokens'],
  ['delete', '/v1/tokens/{id}'],
  ['get', '/v1/agent-actions'],
  ['get', '/v1/ssh'],
  ['get', '/v1/ssh-keys'],
  ['post', '/v1/ssh-keys'],
  ['delete', '/v1/ssh-keys/{id}'],
  ['get', '/v1/ssh/tokens'],
  ['post', '/v1/ssh/tokens'],
  ['delete', '/v1/ssh/tokens/{id}'],
  ['post', '/v1/device/code'],
  ['post', '/v1/device/token'],
  ['post', '/v1/device/lookup'],
  ['post', '/v1/device/approve'],
  ['post', '/v1/apps'],
  ['get', '/v1/apps'],
  ['get', '/v1/apps/{name}'],
  ['delete', '/v1/apps/{name}'],
  ['get', '/v1/apps/{name}/secrets'],
  ['put', '/v1/apps/{name}/secrets'],
  ['delete', '/v1/apps/{name}/secrets/{key}'],
  ['get', '/v1/billing/credits'],
  ['get', '/v1/billing/ledger'],
  ['post', '/admin/v1/orgs'],
  ['get', '/admin/v1/orgs'],
  ['get', '/admin/v1/orgs/{id}'],
  ['post', '/admin/v1/orgs/{id}/users'],
  ['post', '/admin/v1/orgs/{id}/grants'],
  ['post', '/admin/v1/orgs/{id}/suspend'],
  ['post', '/admin/v1/orgs/{id}/unsuspend'],
  ['put', '/admin/v1/orgs/{id}/limits'],
  ['post', '/console/api/sign-in'],
  ['get', '/console/api/me'],
];

it('serves an OpenAPI document covering every implemented route, with schemas', async () => {
  const res = await tp.request('GET', '/v1/openapi.json');
  expect(res.status).toBe(200);
  expect(res.body.openapi).toMatch(/^3\./);
  for (const [method, path] of implemented) {
    expect(res.body.paths[path]?.[method], `${method} ${path}`).toBeDefined();
  }
  const create = res.body.paths['/v1/tokens'].post;
  const schema = create.requestBody.content['application/json'].schema;
  expect(schema.properties.name).toMatchObject({ type: 'string', minLength: 1, maxLength: 120 });
  expect(schema.required).toEqual(['name']);
  expect(create.responses['201']).toBeDefined();
  // The console's pages are not API routes.
  expect(
    Object.keys(res.body.paths).filter(
      (p) => p.startsWith('/console/') && !p.startsWith('/console/api/'),
    ),
  ).toEqual([]);
});

it('lists the error answers of every operation, each an {error, code} body', async () => {
  const doc = (await tp.request('GET', '/v1/openapi.json')).body;
  const missing: string[] = [];
  for (const [path, methods] of Object.entries<Record<string, any>>(doc.paths)) {
    for (const [method, op] of Object.entries<any>(methods)) {
      // The token endpoint answers OAuth's own errors (RFC 6749 5.2), and documents them.
      const expected = path === '/v1/oauth/token' ? ['500'] : ['400', '500', 'default'];
      if (path.includes('{')) expected.push('404');
      if (op.requestBody) expected.push('413', '415');
      if (!Object.keys(op.responses).some((s) => /^2/.test(s)))
        missing.push(`${method} ${path}: no success`);
      for (const status of expected) {
        const schema = op.responses[status]?.content?.['application/json']?.schema;
        if (!schema?.required?.includes('error') || !schema.required.includes('code'))
          missing.push(`${method} ${path}: ${status}`);
      }
    }
  }
  expect(missing).toEqual([]);
  // A keyed route lists 401 and 403; a public one (the device code entrance) no 401.
  expect(doc.paths['/v1/apps/{name}'].get.responses).toHaveProperty('401');
  expect(doc.paths['/v1/apps/{name}'].get.responses).toHaveProperty('403');
  expect(doc.paths['/v1/device/code'].post.responses).not.toHaveProperty('401');
});

it('documents the 204 of every DELETE, and pier answers what it documents', async () => {
  const doc = (await tp.request('GET', '/v1/openapi.json')).body;
  const deletes = Object.entries<Record<string, any>>(doc.paths).filter(([, m]) => m.delete);
  expect(deletes.length).toBeGreaterThan(10);
  const successOf = (path: string) =>
    Object.keys(doc.paths[path].delete.responses).filter((s) => /^2/.test(s));
  // Every delete of the spec that answers 204 (spec part 4's tables) says so.
  for (const path of [
    '/v1/tokens/{id}',
    '/v1/ssh-keys/{id}',
    '/v1/ssh/tokens/{id}',
    '/v1/apps/{name}/secrets/{key}',
    '/v1/volumes/{id}',
    '/v1/webhooks/{id}',
    '/v1/resources/{name}',
    '/v1/domains/zones/{zone}',
  ]) {
    expect(successOf(path), path).toEqual(['204']);
    expect(doc.paths[path].delete.responses['204'].content, path).toBeUndefined();
  }
  // And calling them answers what is documented.
  const org = await tp.createOrg();
  const call = (method: string, path: string, body?: unknown) =>
    tp.request(method, path, { token: org.token, body });
  const token = await call('POST', '/v1/tokens', { name: 'to delete' });
  expect((await call('DELETE', `/v1/tokens/${token.body.id}`)).status).toBe(204);
  await call('POST', '/v1/apps', { name: 'doomed' });
  await call('PUT', '/v1/apps/doomed/secrets', { secrets: { GONE: 'x' } });
  expect((await call('DELETE', '/v1/apps/doomed/secrets/GONE')).status).toBe(
    Number(successOf('/v1/apps/{name}/secrets/{key}')[0]),
  );
  const volume = await call('POST', '/v1/volumes', { name: 'doomed-volume', sizeGb: 1 });
  expect((await call('DELETE', `/v1/volumes/${volume.body.id}`)).status).toBe(
    Number(successOf('/v1/volumes/{id}')[0]),
  );
  expect((await call('DELETE', '/v1/apps/doomed')).status).toBe(
    Number(successOf('/v1/apps/{name}')[0]),
  );
});
