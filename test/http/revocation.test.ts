import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiError } from '../../src/errors/api-error.js';
import { principalOf } from '../../src/http/plugins/auth.js';
import { auth } from '../../src/http/route-auth.js';
import { resolveConfig } from '../../src/config.js';
import { startPlatform, type Platform } from '../../src/platform.js';
import {
  request,
  startTestPlatform,
  type TestOrg,
  type TestPlatform,
} from '../helpers/platform.js';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

// A long-running route (like a wait or a shell session) that stops when its key is revoked.
function slowRoutes(app: FastifyInstance): void {
  app.get('/v1/probe/hold', { config: { auth: auth.F('AA') } }, async (req) => {
    const { signal } = principalOf(req);
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(resolve, 10_000);
      signal.addEventListener('abort', () => {
        clearTimeout(timer);
        // The reason says why: revoked, expired, or the organization suspended.
        reject(
          signal.reason instanceof ApiError
            ? signal.reason
            : new ApiError('unauthenticated', 'The API key was revoked during the request.'),
        );
      });
    });
    return { held: true };
  });
}

let tp: TestPlatform;
let replica: Platform;
let replicaDir: string;
let org: TestOrg;

beforeAll(async () => {
  tp = await startTestPlatform({}, { extraRoutes: [slowRoutes] });
  // A second replica on the same database, as behind a balancer.
  replicaDir = await mkdtemp(path.join(os.tmpdir(), 'pier-replica-'));
  replica = await startPlatform(
    resolveConfig({
      listen: '127.0.0.1:0',
      servicesPort: 0, // not the default 8443: test files run side by side
      sshListen: '127.0.0.1:0',
      dataDir: replicaDir,
      databaseUrl: tp.db.url,
      logLevel: 'silent',
      operatorToken: tp.operatorToken,
    }),
  );
  org = await tp.createOrg();
});
afterAll(async () => {
  await replica?.close();
  await rm(replicaDir, { recursive: true, force: true });
  await tp?.close();
});

/**
 * The replica's answer once it has heard of a change: invalidations travel by NOTIFY, so
 * it is asked again for up to half a second while it still answers 200.
 */
async function answerOnReplica(path: string, token: string) {
  let res = await request(replica.url, 'GET', path, { token });
  for (let i = 0; i < 50 && res.status === 200; i++) {
    await new Promise((r) => setTimeout(r, 10));
    res = await request(replica.url, 'GET', path, { token });
  }
  return res;
}

describe('revocation', () => {
  it('rejects a request already in flight with the revoked key', async () => {
    const key = (
      await tp.request('POST', '/v1/tokens', { token: org.token, body: { name: 'holder' } })
    ).body;
    const started = Date.now();
    const held = tp.request('GET', '/v1/probe/hold', { token: key.token });
    await new Promise((r) => setTimeout(r, 200));
    expect((await tp.request('DELETE', `/v1/tokens/${key.id}`, { token: org.token })).status).toBe(
      204,
    );
    const res = await held;
    expect(res.status).toBe(401);
    expect(res.body.code).toBe('unauthenticated');
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it('rejects a request in flight on this replica when the key is revoked on another', async () => {
    const key = (
      await tp.request('POST', '/v1/tokens', { token: org.token, body: { name: 'elsewhere' } })
    ).body;
    const held = tp.request('GET', '/v1/probe/hold', { token: key.token });
    await new Promise((r) => setTimeout(r, 200));
    const revokedAt = Date.now();
    expect(
      (await request(replica.url, 'DELETE', `/v1/tokens/${key.id}`, { token: org.token })).status,
    ).toBe(204);
    const res = await held;
    expect(Date.now() - revokedAt).toBeLessThan(2000);
    expect([res.status, res.body.code]).toEqual([401, 'unauthenticated']);
    expect(res.body.error).toMatch(/revoked/);
  });

  it('rejects a request in flight when its key expires', async () => {
    const expiresAt = new Date(Date.now() + 1500).toISOString();
    const key = (
      await tp.request('POST', '/v1/tokens', {
        token: org.token,
        body: { name: 'expiring', expiresAt },
      })
    ).body;
    const res = await tp.request('GET', '/v1/probe/hold', { token: key.token });
    expect(Date.now() - Date.parse(expiresAt)).toBeLessThan(2000);
    expect([res.status, res.body.code]).toEqual([401, 'unauthenticated']);
    expect(res.body.error).toMatch(/expired/);
  });

  it('rejects a request in flight when its organization is suspended on another replica', async () => {
    const o = await tp.createOrg();
    const held = tp.request('GET', '/v1/probe/hold', { token: o.token });
    await new Promise((r) => setTimeout(r, 200));
    const suspendedAt = Date.now();
    expect(
      (
        await request(replica.url, 'POST', `/admin/v1/orgs/${o.id}/suspend`, {
          token: tp.operatorToken,
        })
      ).status,
    ).toBe(200);
    const res = await held;
    expect(Date.now() - suspendedAt).toBeLessThan(2000);
    expect([res.status, res.body.code]).toEqual([403, 'org-suspended']);
  });

  it('refuses a revoked key on every replica, even one that had it cached', async () => {
    const key = (
      await tp.request('POST', '/v1/tokens', { token: org.token, body: { name: 'cached' } })
    ).body;
    expect((await request(replica.url, 'GET', '/v1/tokens', { token: key.token })).status).toBe(
      200,
    );
    expect((await tp.request('DELETE', `/v1/tokens/${key.id}`, { token: org.token })).status).toBe(
      204,
    );
    // The invalidation travels by NOTIFY; allow it a moment, then it must hold.
    expect((await answerOnReplica('/v1/tokens', key.token)).status).toBe(401);
  });

  it('listens again after losing its LISTEN connection, and revocation still reaches it', async () => {
    const key = (
      await tp.request('POST', '/v1/tokens', { token: org.token, body: { name: 'relisten' } })
    ).body;
    expect((await request(replica.url, 'GET', '/v1/tokens', { token: key.token })).status).toBe(
      200,
    );
    // Cut every LISTEN connection of this database, as a network blip or a restart would.
    const cut = await tp.platform.store.pool.query(
      `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
        WHERE datname = current_database() AND query LIKE 'LISTEN pier_auth%' AND pid <> pg_backend_pid()`,
    );
    expect(cut.rowCount).toBeGreaterThanOrEqual(2); // this platform's and the replica's
    await new Promise((r) => setTimeout(r, 1500));
    expect((await request(replica.url, 'GET', '/v1/tokens', { token: key.token })).status).toBe(
      200,
    );
    expect((await tp.request('DELETE', `/v1/tokens/${key.id}`, { token: org.token })).status).toBe(
      204,
    );
    expect((await answerOnReplica('/v1/tokens', key.token)).status).toBe(401);
  });

  it('suspends an organization on every replica', async () => {
    const o = await tp.createOrg();
    expect((await request(replica.url, 'GET', '/v1/apps', { token: o.token })).status).toBe(200);
    await tp.admin('POST', `/admin/v1/orgs/${o.id}/suspend`);
    const res = await answerOnReplica('/v1/apps', o.token);
    expect(res.status).toBe(403);
    expect(res.body.code).toBe('org-suspended');
    expect((await tp.request('GET', '/v1/apps', { token: o.token })).body.code).toBe(
      'org-suspended',
    );
  });
});
