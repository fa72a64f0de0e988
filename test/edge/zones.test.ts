/**
 * Zones end to end (spec 2.10, 4.8): a claim, its delegation read from a loopback DNS,
 * a wildcard certificate from pebble through DNS-01 answered by pier's own DNS (pebble
 * resolves through it; it forwards the rest to the loopback DNS), then any `<app>.<zone>`
 * of the org over HTTPS with no certificate of its own; bad input, other orgs, read-only.
 * Pebble validates TLS-ALPN-01 on a closed port here, so a custom domain's certificate
 * comes through HTTP-01 on the API's listener, after TLS-ALPN-01 failed.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import https from 'node:https';
import os from 'node:os';
import tls from 'node:tls';
import path from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';
import {
  freePort,
  startDnsServer,
  startPebble,
  type DnsServer,
  type Pebble,
} from './acme-servers.js';

let dir: string;
let dns: DnsServer;
let pebble: Pebble;
let tp: TestPlatform;
let org: TestOrg;
let other: TestOrg;
let tlsPort: number;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'pier-zones-'));
  dns = await startDnsServer();
  const [apiPort, dnsPort] = [await freePort(), await freePort()];
  tlsPort = await freePort();
  // Pebble resolves through pier's DNS, which forwards what is not its own. Its TLS-ALPN-01
  // validations go to a port nothing listens on.
  pebble = await startPebble(dir, {
    dnsServer: `127.0.0.1:${dnsPort}`,
    httpPort: apiPort,
    tlsPort: await freePort(),
  });
  tp = await startTestPlatform({
    listen: `127.0.0.1:${apiPort}`,
    tlsListen: `127.0.0.1:${tlsPort}`,
    dnsListen: `127.0.0.1:${dnsPort}`,
    edgeAddress: 'edge.pier.test',
    acmeDirectoryUrl: pebble.directoryUrl,
    acmeCaFile: pebble.caFile,
    dnsResolver: dns.address,
  });
  org = await tp.createOrg();
  other = await tp.createOrg();
  for (const [o, name] of [
    [org, 'web'],
    [org, 'api2'],
    [other, 'rival'],
  ] as const)
    expect((await tp.request('POST', '/v1/apps', { token: o.token, body: { name } })).status).toBe(
      201,
    );
}, 120_000);

afterAll(async () => {
  await tp?.close();
  await pebble?.close();
  await dns?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

const call = (method: string, p: string, body?: unknown, token = org.token) =>
  tp.request(method, p, { token, body });

async function waitZone(zone: string, status: string) {
  let z: any;
  for (let i = 0; i < 150; i++) {
    z = (await call('GET', `/v1/domains/zones/${zone}`)).body;
    if (z?.status === status) return z;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`${zone} never reached ${status}: ${JSON.stringify(z)}`);
}

function httpsGet(host: string, ca: string) {
  return new Promise<{ status: number; body: string }>((resolve, reject) => {
    https
      .get(
        {
          host: '127.0.0.1',
          port: tlsPort,
          path: '/',
          servername: host,
          headers: { host },
          ca,
          agent: false,
        },
        (res) => {
          let body = '';
          res.on('data', (c) => (body += c));
          res.on('end', () => resolve({ status: res.statusCode!, body }));
        },
      )
      .on('error', reject);
  });
}

describe('zones', () => {
  it('claims a zone, proves it, gets a wildcard through DNS-01 and routes every app name below it', async () => {
    const claimed = await call('POST', '/v1/domains/zones', { zone: 'Corp.Test' });
    expect(claimed.status).toBe(201);
    const label = claimed.body.acmeLabel;
    expect(claimed.body).toMatchObject({
      zone: 'corp.test',
      orgId: org.id,
      status: 'pending_dns',
      attempts: 0,
      dns: {
        acme: {
          type: 'CNAME',
          name: '_acme-challenge.corp.test',
          value: `${label}.acme.edge.pier.test`,
        },
        point: { type: 'CNAME', name: '*.corp.test', value: 'edge.pier.test' },
      },
    });
    expect((await call('POST', '/v1/domains/zones', { zone: 'corp.test' })).status).toBe(200);
    const pending = await waitZone('corp.test', 'pending_dns');
    for (let i = 0; i < 50 && !pending.error; i++) {
      Object.assign(pending, (await call('GET', '/v1/domains/zones/corp.test')).body);
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(pending.error).toMatch(/_acme-challenge\.corp\.test/);

    await dns.setCname('_acme-challenge.corp.test', `${label}.acme.edge.pier.test`);
    const check = await call('POST', '/v1/domains/zones/corp.test/check');
    expect(check.status).toBe(200);
    expect(check.body).toMatchObject({ status: 'queued', zone: 'corp.test' });
    const issued = await waitZone('corp.test', 'cert_issued');
    expect(issued).toMatchObject({
      verifiedAt: expect.any(String),
      certIssuedAt: expect.any(String),
      certNotAfter: expect.any(String),
      lastCheckedAt: expect.any(String),
    });
    expect(issued.attempts).toBeGreaterThanOrEqual(2);

    const root = await pebble.root();
    const started = performance.now();
    const res = await httpsGet('web.corp.test', root);
    expect(performance.now() - started).toBeLessThan(1000);
    expect(res.status).toBe(503); // the app, reached: it has no machine yet
    expect((await httpsGet('api2.corp.test', root)).status).toBe(503);
    // Another org's app is not reached through this org's zone.
    expect((await httpsGet('rival.corp.test', root)).status).toBe(404);
    await expect(httpsGet('web.corp.test', '')).rejects.toThrow();

    // An app made now answers below the zone at once (no certificate, no reload to wait
    // for), and stops answering with its deletion.
    expect((await call('POST', '/v1/apps', { name: 'late' })).status).toBe(201);
    expect((await httpsGet('late.corp.test', root)).status).toBe(503);
    expect((await call('DELETE', '/v1/apps/late')).status).toBe(204);
    expect((await httpsGet('late.corp.test', root)).status).toBe(404);
  }, 120_000);

  it('covers domains below it without records of their own, and is in use while they are', async () => {
    const d = await call('POST', '/v1/apps/web/domains', { domain: 'shop.corp.test' });
    expect(d.status).toBe(201);
    expect(d.body.zone).toBe('corp.test');
    expect(d.body.dns.proof).toBeUndefined();
    for (let i = 0; i < 100; i++) {
      const got = (await call('GET', '/v1/apps/web/domains')).body[0];
      if (got.status === 'cert_issued') break;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect((await call('GET', '/v1/apps/web/domains')).body[0].status).toBe('cert_issued');
    expect((await httpsGet('shop.corp.test', await pebble.root())).status).toBe(503);
    // The apex, which the wildcard does not cover: the zone's certificate names it too, and
    // it routes nowhere until an app of the org takes it as a custom domain.
    expect((await httpsGet('corp.test', await pebble.root())).status).toBe(404);
    const apex = await call('POST', '/v1/apps/api2/domains', { domain: 'corp.test' });
    expect(apex.status).toBe(201);
    expect(apex.body.zone).toBe('corp.test');
    for (let i = 0; i < 100; i++) {
      const got = (await call('GET', '/v1/apps/api2/domains')).body[0];
      if (got.status === 'cert_issued') break;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect((await call('GET', '/v1/apps/api2/domains')).body[0].status).toBe('cert_issued');
    expect(
      await tp.platform.ctx.db.selectFrom('edge_certificates').select('name').execute(),
    ).toEqual([{ name: '*.corp.test' }]);
    expect((await httpsGet('corp.test', await pebble.root())).status).toBe(503);
    expect((await call('DELETE', '/v1/apps/api2/domains/corp.test')).status).toBe(204);
    expect((await httpsGet('corp.test', await pebble.root())).status).toBe(404);
    const inUse = await call('DELETE', '/v1/domains/zones/corp.test');
    expect(inUse.status).toBe(409);
    expect(inUse.body.code).toBe('zone-in-use');
    // Another org may not claim names in it.
    const taken = await call(
      'POST',
      '/v1/apps/rival/domains',
      { domain: 'x.corp.test' },
      other.token,
    );
    expect(taken.status).toBe(409);
    for (const zone of ['corp.test', 'sub.corp.test']) {
      const res = await call('POST', '/v1/domains/zones', { zone }, other.token);
      expect(res.status, zone).toBe(409);
      expect(res.body.code).toBe('conflict');
    }
  });

  it('gets a name outside the zone its certificate through HTTP-01 when TLS-ALPN-01 fails', async () => {
    const d = await call('POST', '/v1/apps/api2/domains', { domain: 'api.plain.test' });
    expect(d.status).toBe(201);
    await dns.setTxt('_pier-challenge.api.plain.test', d.body.dns.proof.value);
    await call('POST', '/v1/apps/api2/domains/api.plain.test/check');
    let got: any;
    for (let i = 0; i < 150 && got?.status !== 'cert_issued'; i++) {
      await new Promise((r) => setTimeout(r, 100));
      got = (await call('GET', '/v1/apps/api2/domains')).body[0];
    }
    expect(got.status).toBe('cert_issued');
    expect(got.error).toBeUndefined();
    expect((await httpsGet('api.plain.test', await pebble.root())).status).toBe(503);
    expect((await call('DELETE', '/v1/apps/api2/domains/api.plain.test')).status).toBe(204);
  }, 60_000);

  it('refuses bad input and answers other orgs like missing, read-only keys refused', async () => {
    for (const body of [
      {},
      { zone: '' },
      { zone: 'a'.repeat(254) },
      { zone: '*.x.test' },
      { zone: 'nodot' },
      { zone: 1 },
      { zone: 'x.test', y: 1 },
    ]) {
      const res = await call('POST', '/v1/domains/zones', body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.code).toBe('bad-request');
    }
    expect(
      (await call('POST', '/v1/domains/zones', { zone: 'acme.edge.pier.test' })).body.code,
    ).toBe('shadows-default-address');
    for (const [method, p] of [
      ['GET', '/v1/domains/zones/corp.test'],
      ['POST', '/v1/domains/zones/corp.test/check'],
      ['DELETE', '/v1/domains/zones/corp.test'],
    ] as const) {
      const res = await call(method, p, undefined, other.token);
      expect(res.status, `${method} ${p}`).toBe(404);
      expect(res.body.code).toBe('not-found');
    }
    expect((await call('GET', '/v1/domains/zones', undefined, other.token)).body).toEqual([]);
    const ro = (await call('POST', '/v1/tokens', { name: 'ro', scopes: ['read'] })).body.token;
    expect((await call('GET', '/v1/domains/zones', undefined, ro)).status).toBe(200);
    for (const [method, p, body] of [
      ['POST', '/v1/domains/zones', { zone: 'ro.test' }],
      ['POST', '/v1/domains/zones/corp.test/check'],
      ['DELETE', '/v1/domains/zones/corp.test'],
    ] as const) {
      const res = await call(method, p, body, ro);
      expect(res.status, `${method} ${p}`).toBe(403);
      expect(res.body.code).toBe('token-scope');
    }
  });

  it('hands WebSocket upgrades over TLS to the proxy as well', async () => {
    const ca = await pebble.root();
    const head = await new Promise<string>((resolve, reject) => {
      const socket = tls.connect(
        { host: '127.0.0.1', port: tlsPort, servername: 'web.corp.test', ca },
        () =>
          socket.write(
            'GET /ws HTTP/1.1\r\nHost: web.corp.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n' +
              'Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n',
          ),
      );
      let text = '';
      socket.on('data', (c) => (text += c));
      socket.on('close', () => resolve(text));
      socket.on('error', reject);
    });
    // The proxy's own answer for an app without a machine, written on the raw socket.
    expect(head).toMatch(/^HTTP\/1\.1 503/);
    expect(head).toContain('"code":"unavailable"');
  });

  it('answers 503 zones-unavailable without the edge DNS', async () => {
    const saved = tp.platform.config.dnsListen;
    tp.platform.config.dnsListen = undefined;
    try {
      const res = await call('POST', '/v1/domains/zones', { zone: 'new.test' });
      expect(res.status).toBe(503);
      expect(res.body.code).toBe('zones-unavailable');
    } finally {
      tp.platform.config.dnsListen = saved;
    }
  });

  it('releases a zone once nothing uses it: its names stop routing', async () => {
    expect((await call('DELETE', '/v1/apps/web/domains/shop.corp.test')).status).toBe(204);
    expect((await call('DELETE', '/v1/domains/zones/corp.test')).status).toBe(204);
    expect((await call('GET', '/v1/domains/zones/corp.test')).status).toBe(404);
    await expect(httpsGet('web.corp.test', await pebble.root())).rejects.toThrow();
  });
});

describe('zone claims across organizations (issue 24)', () => {
  const rivalCall = (method: string, p: string, body?: unknown) =>
    call(method, p, body, other.token);

  it('lets another org claim and prove a zone overlapping one only claimed here; the claims it rules out end', async () => {
    // This org claims the zone, and a domain below it, and proves neither.
    expect((await call('POST', '/v1/domains/zones', { zone: 'overlap.test' })).status).toBe(201);
    const below = await call('POST', '/v1/apps/web/domains', { domain: 'www.sub.overlap.test' });
    expect(below.status).toBe(201);
    // Another org claims a zone inside it (unproven claims block nobody) and proves it.
    const theirs = await rivalCall('POST', '/v1/domains/zones', { zone: 'sub.overlap.test' });
    expect(theirs.status, JSON.stringify(theirs.body)).toBe(201);
    await dns.setCname(
      '_acme-challenge.sub.overlap.test',
      `${theirs.body.acmeLabel}.acme.edge.pier.test`,
    );
    await rivalCall('POST', '/v1/domains/zones/sub.overlap.test/check');
    let proven: any;
    for (let i = 0; i < 150 && !proven?.verifiedAt; i++) {
      await new Promise((r) => setTimeout(r, 200));
      proven = (await rivalCall('GET', '/v1/domains/zones/sub.overlap.test')).body;
    }
    expect(proven.verifiedAt).toEqual(expect.any(String));
    // This org's zone and domain end, with the reason.
    const mine = await waitZone('overlap.test', 'error');
    expect(mine.error).toMatch(/Another organization proved the zone 'sub\.overlap\.test' first/);
    let domain: any;
    for (let i = 0; i < 50 && domain?.status !== 'error'; i++) {
      await new Promise((r) => setTimeout(r, 100));
      domain = (await call('GET', '/v1/apps/web/domains')).body.find(
        (d: { domain: string }) => d.domain === 'www.sub.overlap.test',
      );
    }
    expect(domain.error).toMatch(/Another organization proved the zone 'sub\.overlap\.test'/);
    // The proven zone holds: overlapping claims are refused now, above and below.
    for (const zone of ['x.sub.overlap.test', 'sub.overlap.test']) {
      const res = await call('POST', '/v1/domains/zones', { zone });
      expect([res.status, res.body.code], zone).toEqual([409, 'conflict']);
    }
    const inside = await call('POST', '/v1/apps/api2/domains', { domain: 'a.sub.overlap.test' });
    expect([inside.status, inside.body.code]).toEqual([409, 'conflict']);
    expect((await call('DELETE', '/v1/apps/web/domains/www.sub.overlap.test')).status).toBe(204);
    expect((await call('DELETE', '/v1/domains/zones/overlap.test')).status).toBe(204);
    expect((await rivalCall('DELETE', '/v1/domains/zones/sub.overlap.test')).status).toBe(204);
  }, 120_000);

  it('ends a zone claim left unproven for 7 days', async () => {
    expect((await call('POST', '/v1/domains/zones', { zone: 'stale.test' })).status).toBe(201);
    await sql`UPDATE edge_zones SET created_at = now() - interval '7 days 1 minute' WHERE zone = 'stale.test'`.execute(
      tp.platform.ctx.db,
    );
    const ended = await waitZone('stale.test', 'error');
    expect(ended.error).toMatch(/Not proven within 7 days/);
    expect((await call('DELETE', '/v1/domains/zones/stale.test')).status).toBe(204);
  }, 60_000);

  it('refuses public suffixes as zones with 400, and accepts zones below them', async () => {
    for (const zone of ['co.uk', 'github.io', 'com']) {
      const res = await call('POST', '/v1/domains/zones', { zone });
      expect([res.status, res.body.code], zone).toEqual([400, 'bad-request']);
      expect(res.body.issues[0].message).toMatch(/is a public suffix/);
    }
    for (const zone of ['foo.co.uk', 'me.github.io']) {
      expect((await call('POST', '/v1/domains/zones', { zone })).status, zone).toBe(201);
      expect((await call('DELETE', `/v1/domains/zones/${zone}`)).status).toBe(204);
    }
  });
});
