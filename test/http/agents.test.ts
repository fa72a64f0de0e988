import type { FastifyInstance } from 'fastify';
import { readFile } from 'node:fs/promises';
import https from 'node:https';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { principalOf } from '../../src/http/plugins/auth.js';
import { appFromParams, auth } from '../../src/http/route-auth.js';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';

// A route the agent rules do not know (no agent row), to show such routes are refused.
function probeRoutes(app: FastifyInstance): void {
  app.get(
    '/v1/probe/unknown-to-agents/:name',
    { config: { auth: auth.F(undefined, appFromParams) } },
    async (req) => ({
      org: principalOf(req).orgId,
    }),
  );
}

let tp: TestPlatform;
let org: TestOrg;

async function agentToken(agent: Record<string, unknown>): Promise<{ id: string; token: string }> {
  const res = await tp.request('POST', '/v1/tokens', {
    token: org.token,
    body: { name: 'agent', agent },
  });
  expect(res.status).toBe(201);
  expect(res.body.agent).toEqual(agent);
  return res.body;
}

beforeAll(async () => {
  tp = await startTestPlatform({}, { extraRoutes: [probeRoutes] });
  org = await tp.createOrg();
  await tp.request('POST', '/v1/apps', { token: org.token, body: { name: 'agent-web' } });
  await tp.request('POST', '/v1/apps', { token: org.token, body: { name: 'agent-other' } });
});
afterAll(async () => tp?.close());

describe('agent tokens', () => {
  it('lets sandbox and twin write, and production only read', async () => {
    for (const cls of ['sandbox', 'twin']) {
      const a = await agentToken({ class: cls });
      const res = await tp.request('POST', '/v1/apps', {
        token: a.token,
        body: { name: `by-${cls}` },
      });
      expect(res.status).toBe(201);
    }
    const prod = await agentToken({ class: 'production' });
    const write = await tp.request('POST', '/v1/apps', {
      token: prod.token,
      body: { name: 'by-prod' },
    });
    expect(write.status).toBe(403);
    expect(write.body.code).toBe('agent-token-production-readonly');
    const del = await tp.request('DELETE', '/v1/apps/agent-web/secrets/X', { token: prod.token });
    expect(del.body.code).toBe('agent-token-production-readonly');
    expect((await tp.request('GET', '/v1/apps', { token: prod.token })).status).toBe(200);
    expect(
      (await tp.request('GET', '/v1/apps/agent-web/secrets', { token: prod.token })).status,
    ).toBe(200);
  });

  it('never lets an agent mint, reveal or revoke a credential', async () => {
    const a = await agentToken({ class: 'sandbox' });
    const cases: [string, string, unknown?][] = [
      ['POST', '/v1/tokens', { name: 'more' }],
      ['DELETE', `/v1/tokens/${a.id}`],
      ['POST', '/v1/ssh-keys', { publicKey: 'ssh-ed25519 AAAA' }],
      ['POST', '/v1/ssh/tokens', { app: 'agent-web' }],
      ['POST', '/v1/device/approve', { userCode: 'ABCD-EFGH' }],
    ];
    for (const [method, path, body] of cases) {
      const res = await tp.request(method, path, { token: a.token, body });
      expect(res.status, path).toBe(403);
      expect(res.body.code, path).toBe('agent-token-credential');
    }
    expect((await tp.request('GET', '/v1/tokens', { token: a.token })).status).toBe(200);
  });

  it('keeps an agent with an app list to those apps, and off routes about no app', async () => {
    const a = await agentToken({ class: 'sandbox', apps: ['agent-web'] });
    expect((await tp.request('GET', '/v1/apps/agent-web', { token: a.token })).status).toBe(200);
    const put = await tp.request('PUT', '/v1/apps/agent-web/secrets', {
      token: a.token,
      body: { secrets: { K: 'v' } },
    });
    expect(put.status).toBe(200);
    for (const path of ['/v1/apps/agent-other', '/v1/apps', '/v1/tokens']) {
      const res = await tp.request('GET', path, { token: a.token });
      expect(res.status, path).toBe(403);
      expect(res.body.code).toBe('agent-token-app-scope');
    }
    const create = await tp.request('POST', '/v1/apps', {
      token: a.token,
      body: { name: 'not-listed' },
    });
    expect(create.body.code).toBe('agent-token-app-scope');
  });

  it('keeps an agent with an app list from attaching or detaching databases and buckets', async () => {
    const bucket = 'agent-attach-bkt';
    expect(
      (await tp.request('POST', '/v1/buckets', { token: org.token, body: { name: bucket } }))
        .status,
    ).toBe(201);
    const limited = await agentToken({ class: 'sandbox', apps: ['agent-web'] });
    const refused: [string, Record<string, string>][] = [
      ['attach', { bucket }],
      ['attach', { database: 'agent-db' }],
      ['attach', { volume: 'agent-vol' }],
      ['detach', { bucket }],
      ['detach', { database: 'agent-db' }],
    ];
    for (const [verb, body] of refused) {
      const res = await tp.request('POST', `/v1/apps/agent-web/${verb}`, {
        token: limited.token,
        body,
      });
      expect([res.status, res.body.code], `${verb} ${JSON.stringify(body)}`).toEqual([
        403,
        'agent-token-app-scope',
      ]);
      expect(res.body.error).toContain(`cannot ${verb} the ${Object.keys(body)[0]}`);
    }
    // Detaching a volume from its own app takes nothing from outside it: judged allowed
    // (there is no such volume here, so the service answers).
    const vol = await tp.request('POST', '/v1/apps/agent-web/detach', {
      token: limited.token,
      body: { volume: 'agent-vol' },
    });
    expect(vol.status).toBe(404);
    const audit = await tp.request('GET', `/v1/agent-actions?token=${limited.id}&limit=10`, {
      token: org.token,
    });
    expect(audit.body).toHaveLength(refused.length + 1);
    expect(audit.body[0]).toMatchObject({ route: '/v1/apps/:name/detach', verdict: 'allowed' });
    for (const entry of audit.body.slice(1)) {
      expect(entry).toMatchObject({
        tokenId: limited.id,
        method: 'POST',
        app: 'agent-web',
        verdict: 'refused',
        code: 'agent-token-app-scope',
      });
    }
    expect(audit.body.at(-1)).toMatchObject({
      route: '/v1/apps/:name/attach',
      path: '/v1/apps/agent-web/attach',
    });
    // A sandbox token without an app list attaches and detaches as before.
    const open = await agentToken({ class: 'sandbox' });
    const attached = await tp.request('POST', '/v1/apps/agent-web/attach', {
      token: open.token,
      body: { bucket },
    });
    expect(attached.status, JSON.stringify(attached.body)).toBe(200);
    const noDb = await tp.request('POST', '/v1/apps/agent-web/attach', {
      token: open.token,
      body: { database: 'agent-db' },
    });
    expect(noDb.status).toBe(404); // past the judge: there is no such database
    const detached = await tp.request('POST', '/v1/apps/agent-web/detach', {
      token: open.token,
      body: { bucket },
    });
    expect(detached.status, JSON.stringify(detached.body)).toBe(200);
  });

  it('judges keys and agent tokens the same on the services listener machines use', async () => {
    // Machines reach the API through the TLS services listener (PIER_SERVICES_PORT), not the
    // public listener: the same hooks must judge every request that arrives there.
    const ca = await readFile(path.join(tp.dataDir, 'ca.crt'), 'utf8');
    const { servicesHost, servicesPort } = tp.platform.ctx.config;
    const viaServices = (method: string, p: string, token?: string, body?: unknown) =>
      new Promise<{ status: number; body: any }>((resolve, reject) => {
        const data = body === undefined ? undefined : JSON.stringify(body);
        const req = https.request(
          {
            host: servicesHost,
            port: servicesPort,
            method,
            path: p,
            ca,
            headers: {
              ...(token ? { authorization: `Bearer ${token}` } : {}),
              ...(data ? { 'content-type': 'application/json' } : {}),
            },
          },
          (res) => {
            let text = '';
            res.on('data', (c: Buffer) => (text += c));
            res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) }));
          },
        );
        req.on('error', reject);
        req.end(data);
      });
    expect((await viaServices('GET', '/v1/apps')).body.code).toBe('unauthenticated');
    const reader = await tp.request('POST', '/v1/tokens', {
      token: org.token,
      body: { name: 'reader', scopes: ['read'] },
    });
    expect((await viaServices('GET', '/v1/apps/agent-web', reader.body.token)).status).toBe(200);
    const write = await viaServices('POST', '/v1/apps', reader.body.token, { name: 'via-svc' });
    expect([write.status, write.body.code]).toEqual([403, 'token-scope']);
    const limited = await agentToken({ class: 'sandbox', apps: ['agent-web'] });
    expect((await viaServices('GET', '/v1/apps/agent-web', limited.token)).status).toBe(200);
    const other = await viaServices('GET', '/v1/apps/agent-other', limited.token);
    expect([other.status, other.body.code]).toEqual([403, 'agent-token-app-scope']);
    const attach = await viaServices('POST', '/v1/apps/agent-web/attach', limited.token, {
      bucket: 'agent-attach-bkt',
    });
    expect([attach.status, attach.body.code]).toEqual([403, 'agent-token-app-scope']);
    const audit = await tp.request('GET', `/v1/agent-actions?token=${limited.id}&limit=10`, {
      token: org.token,
    });
    expect(audit.body.map((e: { verdict: string }) => e.verdict)).toEqual([
      'refused',
      'refused',
      'allowed',
    ]);
    await tp.request('DELETE', `/v1/tokens/${reader.body.id}`, { token: org.token });
    const revoked = await viaServices('GET', '/v1/apps/agent-web', reader.body.token);
    expect([revoked.status, revoked.body.code]).toEqual([401, 'unauthenticated']);
  });

  it('refuses routes unknown to the agent rules, and the organization header', async () => {
    const a = await agentToken({ class: 'twin' });
    const unknown = await tp.request('GET', '/v1/probe/unknown-to-agents/agent-web', {
      token: a.token,
    });
    expect(unknown.status).toBe(403);
    expect(unknown.body.code).toBe('agent-token-route-unknown');
    expect(
      (await tp.request('GET', '/v1/probe/unknown-to-agents/agent-web', { token: org.token }))
        .status,
    ).toBe(200);
    const delegated = await tp.request('GET', '/v1/apps', {
      token: a.token,
      headers: { 'x-platform-org': org.id },
    });
    expect(delegated.status).toBe(403);
    expect(delegated.body.code).toBe('agent-token-delegation');
  });

  it('audits every judged request with its verdict', async () => {
    const a = await agentToken({ class: 'production' });
    await tp.request('GET', '/v1/apps/agent-web', { token: a.token });
    await tp.request('POST', '/v1/apps', { token: a.token, body: { name: 'audited' } });
    const res = await tp.request('GET', `/v1/agent-actions?token=${a.id}&limit=10`, {
      token: org.token,
    });
    expect(res.status).toBe(200);
    expect(res.body).toHaveLength(2);
    const [refused, allowed] = res.body;
    expect(refused).toMatchObject({
      tokenId: a.id,
      method: 'POST',
      route: '/v1/apps',
      app: 'audited',
      verdict: 'refused',
      code: 'agent-token-production-readonly',
    });
    expect(allowed).toMatchObject({
      tokenId: a.id,
      method: 'GET',
      route: '/v1/apps/:name',
      path: '/v1/apps/agent-web',
      app: 'agent-web',
      verdict: 'allowed',
    });
    expect(allowed.requestId).toMatch(/^req-/);
    expect(allowed.code).toBeUndefined();
    const limited = await tp.request('GET', '/v1/agent-actions?limit=1', { token: org.token });
    expect(limited.body).toHaveLength(1);
    for (const q of ['limit=0', 'limit=1001', 'limit=abc', 'bogus=1']) {
      expect(
        (await tp.request('GET', `/v1/agent-actions?${q}`, { token: org.token })).status,
        q,
      ).toBe(400);
    }
  });

  it('does not run the action when the audit cannot be written', async () => {
    const a = await agentToken({ class: 'sandbox' });
    const admin = new pg.Client({ connectionString: tp.db.url });
    await admin.connect();
    await admin.query('ALTER TABLE agent_actions RENAME TO agent_actions_away');
    try {
      const res = await tp.request('POST', '/v1/apps', {
        token: a.token,
        body: { name: 'unaudited' },
      });
      expect(res.status).toBe(503);
      expect(res.body.code).toBe('agent-audit-unavailable');
      // A plain key is not judged, so it is not held up by the audit.
      const check = await tp.request('GET', '/v1/apps/unaudited', { token: org.token });
      expect(check.status).toBe(404);
    } finally {
      await admin.query('ALTER TABLE agent_actions_away RENAME TO agent_actions');
      await admin.end();
    }
    expect(
      (await tp.request('POST', '/v1/apps', { token: a.token, body: { name: 'unaudited' } }))
        .status,
    ).toBe(201);
  });
});
