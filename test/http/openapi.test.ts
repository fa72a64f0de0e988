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
