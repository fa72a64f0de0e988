import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.js';

let tp: TestPlatform;
beforeAll(async () => {
  tp = await startTestPlatform();
});
afterAll(async () => tp?.close());

describe('health, metrics and request ids', () => {
  it('answers /healthz', async () => {
    const res = await tp.request('GET', '/healthz');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ ok: true });
  });

  it('returns a request id header, keeping a sane incoming one', async () => {
    const res = await tp.request('GET', '/healthz', { headers: { 'x-request-id': 'abc-123' } });
    expect(res.headers.get('x-request-id')).toBe('abc-123');
    const other = await tp.request('GET', '/healthz');
    expect(other.headers.get('x-request-id')).toMatch(/^req-[0-9a-f]{10}[0-9a-z]+$/);
  });

  it('refuses /metrics without the operator token, in the API error format', async () => {
    for (const token of [undefined, 'not-the-operator-token']) {
      const res = await tp.request('GET', '/metrics', { token });
      expect(res.status).toBe(401);
      expect(res.headers.get('content-type')).toContain('application/json');
      expect(res.body).toMatchObject({ code: 'unauthenticated' });
      expect(JSON.stringify(res.body)).not.toContain('pier_http_requests_total');
    }
    // An organization's full-access key is not the operator either.
    const org = await tp.createOrg();
    expect((await tp.request('GET', '/metrics', { token: org.token })).status).toBe(401);
  });

  it('exposes Prometheus metrics with request counts to the operator', async () => {
    await tp.request('GET', '/healthz');
    const res = await tp.request('GET', '/metrics', { token: tp.operatorToken });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/plain');
    expect(res.body).toContain(
      'pier_http_requests_total{method="GET",route="/healthz",status="200"}',
    );
  });
});
