/**
 * A name of `.` or `..` in the console's in-process calls: the console asks the route the
 * name belongs in, which answers for that name, and never the route the dot segment would
 * resolve to (`DELETE /v1/apps/web/secrets/..` is not `DELETE /v1/apps/web`).
 */
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';
import { addPerson, ConsoleVisitor } from './console-client.js';

let tp: TestPlatform;
let org: TestOrg;
let v: ConsoleVisitor;
let csrf: string;
const EMAIL = 'dot@example.com';

beforeAll(async () => {
  tp = await startTestPlatform();
  org = await tp.createOrg({ name: 'Dot Org' });
  await addPerson(tp, org.id, EMAIL);
  expect(
    (await tp.request('POST', '/v1/apps', { token: org.token, body: { name: 'web' } })).status,
  ).toBe(201);
  v = new ConsoleVisitor(tp);
  expect((await v.signIn(EMAIL)).status).toBe(303);
  csrf = await v.csrf();
});
afterAll(async () => tp?.close());

/** A GET of `path` exactly as written: a URL string (fetch, http.get) is resolved first. */
function rawGet(path: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const { hostname, port } = new URL(tp.url);
    const options = { hostname, port, path, headers: { cookie: v.cookie! } };
    const req = http.get(options, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on('error', reject);
  });
}

describe('a name of . or .. in a console call', () => {
  it('deletes the secret named "..", not the app its dot segment resolves to', async () => {
    const res = await v.post(
      '/console/secrets/web/delete',
      { _csrf: csrf, name: '..' },
      { origin: tp.url },
    );
    // The app is still there...
    const app = await tp.request('GET', '/v1/apps/web', { token: org.token });
    expect(app.status).toBe(200);
    // ...and the secrets route answered for a secret of that name: there is none.
    expect(res.status, res.text).toBe(404);
    expect(res.text).toContain('not-found');
  });

  it('reads the database named ".", not the list its dot segment resolves to', async () => {
    // `/v1/resources/.` resolved would be `/v1/resources/`: the list of databases.
    const page = await rawGet('/console/databases/%2E');
    expect(page.status, page.text).toBe(404);
    expect(page.text).toContain('not-found');
  });
});
