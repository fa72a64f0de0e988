import type { FastifyInstance } from 'fastify';
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { auth } from '../../src/http/route-auth.js';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';

const logLines: string[] = [];
const sink = new Writable({
  write(chunk, _enc, done) {
    logLines.push(String(chunk));
    done();
  },
});

function failingRoutes(app: FastifyInstance): void {
  app.get('/v1/probe/crash', { config: { auth: auth.F('AA') } }, async () => {
    throw new Error('database exploded at /secret/internal/path');
  });
}

let tp: TestPlatform;
let org: TestOrg;
beforeAll(async () => {
  tp = await startTestPlatform(
    {},
    { logger: pino({ level: 'info' }, sink), extraRoutes: [failingRoutes] },
  );
  org = await tp.createOrg();
});
afterAll(async () => tp?.close());

describe('error answers', () => {
  it('answers an unknown route with a JSON 404', async () => {
    const res = await tp.request('GET', '/v1/nothing-here', { token: org.token });
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ error: 'No route GET /v1/nothing-here.', code: 'not-found' });
  });

  it('answers a wrong method with 405 and Allow', async () => {
    const res = await tp.request('PUT', '/v1/tokens', { token: org.token, body: {} });
    expect(res.status).toBe(405);
    expect(res.body.code).toBe('method-not-allowed');
    expect(res.headers.get('allow')).toContain('GET');
    expect(res.headers.get('allow')).toContain('POST');
  });

  it('answers malformed JSON with 400 bad-request', async () => {
    const res = await tp.request('POST', '/v1/apps', { token: org.token, raw: '{"name":' });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('bad-request');
    expect(res.body.issues).toEqual([{ path: '', message: 'the body is not valid JSON' }]);
  });

  it('answers a body that is too large with 413 too-large', async () => {
    const res = await tp.request('POST', '/v1/apps', {
      token: org.token,
      raw: JSON.stringify({ name: 'x'.repeat(2 * 1024 * 1024) }),
    });
    expect(res.status).toBe(413);
    expect(res.body.code).toBe('too-large');
  });

  it('answers a non-JSON body with 415', async () => {
    const res = await tp.request('POST', '/v1/apps', {
      token: org.token,
      raw: 'name=x',
      headers: { 'content-type': 'text/plain' },
    });
    expect(res.status).toBe(415);
    expect(res.body.code).toBe('unsupported-media-type');
  });

  it('answers an unexpected failure with 500 internal and a reference that is in the logs', async () => {
    const res = await tp.request('GET', '/v1/probe/crash', { token: org.token });
    expect(res.status).toBe(500);
    expect(res.body.code).toBe('internal');
    const ref = res.body.reference as string;
    expect(ref).toMatch(/^ref-[0-9a-f]{12}$/);
    expect(res.body.error).toContain(ref);
    const text = JSON.stringify(res.body);
    expect(text).not.toContain('exploded');
    expect(text).not.toContain('at ');
    const line = logLines.find((l) => l.includes(ref));
    expect(line).toBeDefined();
    expect(line).toContain('database exploded');
    expect(JSON.parse(line!).reqId).toBe(res.headers.get('x-request-id'));
  });

  it('never logs the key', async () => {
    await tp.request('GET', '/v1/tokens', { token: org.token });
    expect(logLines.join('')).not.toContain(org.token);
  });
});
