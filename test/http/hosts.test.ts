import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.js';

let tp: TestPlatform;
beforeAll(async () => {
  // A directory pool keeps this test off loop devices; src/storage tests the btrfs pool.
  tp = await startTestPlatform({ storagePool: 'directory' });
});
afterAll(async () => tp?.close());

describe('GET /admin/v1/hosts', () => {
  it('needs the operator token', async () => {
    const org = await tp.createOrg();
    expect((await tp.request('GET', '/admin/v1/hosts', { token: org.token })).status).toBe(401);
  });

  it('describes the host, its pool and what runs on it', async () => {
    const org = await tp.createOrg();
    await tp.request('POST', '/v1/buckets', { token: org.token, body: { name: 'host-count' } });
    const res = await tp.admin('GET', '/admin/v1/hosts');
    expect(res.status).toBe(200);
    expect(res.body).toHaveLength(1);
    const [host] = res.body;
    expect(host).toMatchObject({ id: 'local', region: 'local', objectStore: 'fs' });
    expect(host.pool.kind).toBe('directory');
    expect(host.pool.reason).toMatch(/\w/);
    expect(host.pool.totalBytes).toBeGreaterThan(0);
    expect(host.pool.freeBytes).toBeGreaterThan(0);
    expect(host.running.buckets).toBeGreaterThanOrEqual(1);
  });
});
