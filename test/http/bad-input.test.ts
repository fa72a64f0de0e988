/**
 * The bad input Schemathesis found (issue 24, "Bad input"), each held here by name: a
 * QUERY without Content-Type, NUL and lone surrogates in strings that reach PostgreSQL,
 * PATCH {} of a volume, CORS header names that are not HTTP tokens, framework refusals
 * (414, 431) without a catalogue code, and PostgreSQL's own text refusal as a last guard.
 * The generated pass over every operation is generated-input.test.ts.
 */
import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { auth } from '../../src/http/route-auth.js';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';

let tp: TestPlatform;
let org: TestOrg;

/** A route that hands a string to PostgreSQL unvalidated: the renderer's last guard. */
function unvalidatedQuery(app: FastifyInstance): void {
  app.post('/v1/probe/raw-text', { config: { auth: auth.F('AA') } }, async (req) => {
    const text = Buffer.from((req.body as { hex: string }).hex, 'hex').toString('latin1');
    await sql`SELECT ${text}::text`.execute(tp.platform.ctx.db);
    return {};
  });
}

beforeAll(async () => {
  tp = await startTestPlatform({}, { extraRoutes: [unvalidatedQuery] });
  org = await tp.createOrg();
});
afterAll(async () => tp?.close());

describe('QUERY without a Content-Type', () => {
  it('answers 405 with Allow on a route path, with or without a key, and 404 elsewhere', async () => {
    for (const token of [undefined, org.token]) {
      const res = await tp.request('QUERY', '/v1/apps', { token });
      expect([res.status, res.body.code]).toEqual([405, 'method-not-allowed']);
      expect(res.headers.get('allow')).toContain('GET');
    }
    const res = await tp.request('QUERY', '/v1/nothing-here');
    expect([res.status, res.body.code]).toEqual([404, 'not-found']);
  });
});

describe('text PostgreSQL cannot store', () => {
  const cases: [string, string, Record<string, unknown>, string, string | undefined][] = [
    ['POST', '/v1/tokens', { name: 'a\u0000b' }, 'name', 'key'],
    ['POST', '/v1/ssh/tokens', { app: 'web', machine: 'm\u0000' }, 'machine', 'key'],
    ['POST', '/v1/apps/web/protection/links', { label: 'l\u0000' }, 'label', 'key'],
    [
      'PUT',
      '/v1/buckets/some-bucket/cors',
      { rules: [{ id: 'r\u0000', allowedMethods: ['GET'], allowedOrigins: ['*'] }] },
      'rules.0.id',
      'key',
    ],
    ['POST', '/v1/device/code', { client: 'cli\u0000' }, 'client', undefined],
    [
      'POST',
      '/v1/oauth/register',
      { redirect_uris: ['https://ok.example/cb'], client_name: 'n\u0000' },
      'client_name',
      undefined,
    ],
    [
      'POST',
      '/console/api/sign-in',
      { email: 'a\u0000@x.test', password: 'p' },
      'email',
      undefined,
    ],
  ];

  it.each(cases)(
    '%s %s refuses a NUL with 400 and the field in issues',
    async (m, p, body, field, key) => {
      const res = await tp.request(m, p, { token: key && org.token, body });
      expect([res.status, res.body.code]).toEqual([400, 'bad-request']);
      expect(res.body.issues).toContainEqual({ path: field, message: 'contains a NUL character' });
    },
  );

  it('refuses a lone surrogate (it has no UTF-8 form), and an unknown field of one, all at once', async () => {
    const res = await tp.request('POST', '/v1/tokens', {
      token: org.token,
      raw: '{"name":"a\\ud800b","\\udc00":1,"scopes":"x"}',
    });
    expect(res.status).toBe(400);
    expect(res.body.issues).toEqual(
      expect.arrayContaining([
        { path: 'name', message: 'contains a lone surrogate (not valid Unicode)' },
        { path: '\udc00', message: 'the field name contains a lone surrogate (not valid Unicode)' },
        expect.objectContaining({ path: 'scopes' }),
      ]),
    );
  });

  it('refuses a NUL in a path parameter and in a query parameter', async () => {
    const param = await tp.request('GET', '/v1/apps/a%00b', { token: org.token });
    expect(param.status).toBe(400);
    expect(param.body.issues).toEqual([{ path: 'name', message: 'contains a NUL character' }]);
    const query = await tp.request('GET', '/v1/apps?x=a%00b', { token: org.token });
    expect(query.status).toBe(400);
    expect(query.body.issues).toEqual([{ path: 'x', message: 'contains a NUL character' }]);
  });

  it('refuses a NUL in an S3 gateway key or query with S3 InvalidArgument, before any signature check', async () => {
    for (const path of ['/s3/some-bucket/a%00b', '/s3/some-bucket?prefix=%00']) {
      const res = await fetch(tp.url + path);
      expect(res.status, path).toBe(400);
      expect(await res.text(), path).toContain('<Code>InvalidArgument</Code>');
    }
  });

  it('answers 400 when PostgreSQL itself refuses text that reached a query', async () => {
    const res = await tp.request('POST', '/v1/probe/raw-text', {
      token: org.token,
      body: { hex: '610062' },
    });
    expect([res.status, res.body.code]).toEqual([400, 'bad-request']);
    expect(res.body.issues).toHaveLength(1);
  });
});

describe('every 400 lists its issues', () => {
  it('an invalid SSH key (400 invalid-key) names the field', async () => {
    const res = await tp.request('POST', '/v1/ssh-keys', {
      token: org.token,
      body: { publicKey: 'X Y' },
    });
    expect([res.status, res.body.code]).toEqual([400, 'invalid-key']);
    expect(res.body.issues).toEqual([{ path: 'publicKey', message: expect.any(String) }]);
  });
});

describe('nesting', () => {
  it('refuses a body nested deeper than 32 levels with 400, without walking it', async () => {
    const res = await tp.request('POST', '/v1/tokens', {
      token: org.token,
      raw: '{"name":' + '['.repeat(100_000) + ']'.repeat(100_000) + '}',
    });
    expect([res.status, res.body.code]).toEqual([400, 'bad-request']);
    expect(res.body.issues[0].message).toBe('nested deeper than 32 levels');
  });
});

describe('PATCH of a volume with nothing to change', () => {
  it('answers 200 with the volume unchanged', async () => {
    const made = await tp.request('POST', '/v1/volumes', {
      token: org.token,
      body: { name: 'patch-me', sizeGb: 1 },
    });
    expect(made.status).toBe(201);
    const res = await tp.request('PATCH', `/v1/volumes/${made.body.id}`, {
      token: org.token,
      body: {},
    });
    expect(res.status).toBe(200);
    expect(res.body).toEqual(made.body);
  });
});

describe('CORS header names', () => {
  it('refuses header names that are not HTTP tokens, and takes x-amz-* and *', async () => {
    const bucket = await tp.request('POST', '/v1/buckets', {
      token: org.token,
      body: { name: `cors-${org.id.slice(-8)}` },
    });
    expect(bucket.status).toBe(201);
    const put = (rule: Record<string, unknown>) =>
      tp.request('PUT', `/v1/buckets/${bucket.body.name}/cors`, {
        token: org.token,
        body: { rules: [{ allowedMethods: ['GET'], allowedOrigins: ['*'], ...rule }] },
      });
    const bad = await put({
      exposeHeaders: ['x-ok', 'bad\u0001', 'é-header'],
      allowedHeaders: ['with space'],
      allowedOrigins: ['https://a.example\u0007'],
    });
    expect(bad.status).toBe(400);
    expect(bad.body.issues.map((i: { path: string }) => i.path).sort()).toEqual([
      'rules.0.allowedHeaders.0',
      'rules.0.allowedOrigins.0',
      'rules.0.exposeHeaders.1',
      'rules.0.exposeHeaders.2',
    ]);
    const good = await put({
      exposeHeaders: ['etag', 'x-amz-meta-a'],
      allowedHeaders: ['x-amz-*', '*'],
    });
    expect(good.status).toBe(200);
  });
});

describe('refusals of the HTTP server itself carry catalogue codes', () => {
  it('a path parameter over 1024 characters: 414 uri-too-long', async () => {
    const res = await tp.request('GET', `/v1/apps/${'a'.repeat(1100)}`, { token: org.token });
    expect(res.status).toBe(414);
    expect(res.body).toEqual({
      error: 'A part of the path is longer than 1024 characters.',
      code: 'uri-too-long',
    });
  });

  it('headers over 16 KB: 431 headers-too-large', async () => {
    const res = await tp.request('GET', '/v1/apps', {
      token: org.token,
      headers: { 'x-big': 'a'.repeat(17_000) },
    });
    expect(res.status).toBe(431);
    expect(res.body.code).toBe('headers-too-large');
  });

  it('a path that is not valid percent-encoding: 400 with issues', async () => {
    const res = await tp.request('GET', '/v1/apps/%zz', { token: org.token });
    expect([res.status, res.body.code]).toEqual([400, 'bad-request']);
    expect(res.body.issues).toHaveLength(1);
  });
});
