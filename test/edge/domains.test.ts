/**
 * Custom domains end to end (spec 4.8): DNS proofs read from a DNS server on loopback,
 * a certificate from a real ACME CA (pebble, TLS-ALPN-01 answered by the TLS edge: pebble
 * validates HTTP-01 on a closed port here, so no other challenge can succeed; zones.test.ts
 * has HTTP-01), then HTTPS through the TLS edge verifying against pebble's root; bad input,
 * another organization's domains, read-only keys, the app's deletion taking its domains.
 */
import { X509Certificate } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import type { TLSSocket } from 'node:tls';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reloadEdgeTable } from '../../src/services/domains/hosts.js';
import { announceEdgeChange, edgeMemory } from '../../src/services/domains/memory.js';
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
  dir = await mkdtemp(path.join(os.tmpdir(), 'pier-edge-'));
  dns = await startDnsServer();
  tlsPort = await freePort();
  // HTTP-01 would be validated on a port nothing listens on.
  pebble = await startPebble(dir, {
    dnsServer: dns.address,
    httpPort: await freePort(),
    tlsPort,
  });
  tp = await startTestPlatform({
    tlsListen: `127.0.0.1:${tlsPort}`,
    edgeAddress: 'edge.pier.test',
    acmeDirectoryUrl: pebble.directoryUrl,
    acmeCaFile: pebble.caFile,
    dnsResolver: dns.address,
  });
  org = await tp.createOrg();
  other = await tp.createOrg();
  for (const [o, name] of [
    [org, 'shop'],
    [org, 'blog'],
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

async function waitFor(app: string, domain: string, status: string, token = org.token) {
  let d: any;
  for (let i = 0; i < 150; i++) {
    const list = await call('GET', `/v1/apps/${app}/domains`, undefined, token);
    d = list.body.find((x: { domain: string }) => x.domain === domain);
    if (d?.status === status) return d;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`${domain} never reached ${status}: ${JSON.stringify(d)}`);
}

interface HttpsAnswer {
  status: number;
  body: string;
  headers: Record<string, unknown>;
  /** SHA-256 fingerprint of the certificate the edge served. */
  fingerprint: string;
}

/** An HTTPS request through the edge, trusting only pebble's root. */
function httpsGet(host: string, ca: string, urlPath = '/') {
  return new Promise<HttpsAnswer>((resolve, reject) => {
    https
      .get(
        {
          host: '127.0.0.1',
          port: tlsPort,
          path: urlPath,
          servername: host,
          headers: { host },
          ca,
          agent: false,
        },
        (res) => {
          let body = '';
          const { fingerprint256 } = (res.socket as TLSSocket).getPeerCertificate();
          res.on('data', (c) => (body += c));
          res.on('end', () =>
            resolve({
              status: res.statusCode!,
              body,
              headers: res.headers,
              fingerprint: fingerprint256,
            }),
          );
        },
      )
      .on('error', reject);
  });
}

/** A plain HTTP request to the API's listener with a `Host` of our choosing. */
function plainGet(host: string, urlPath: string) {
  const { port } = new URL(tp.url);
  return new Promise<{ status: number; location?: string }>((resolve, reject) => {
    http
      .get({ host: '127.0.0.1', port, path: urlPath, headers: { host } }, (res) => {
        res.resume();
        resolve({ status: res.statusCode!, location: res.headers.location });
      })
      .on('error', reject);
  });
}

describe('custom domains', () => {
  it('answers the DNS records to set, proves them, issues a certificate and serves HTTPS', async () => {
    const added = await call('POST', '/v1/apps/shop/domains', { domain: 'Shop.Example.test.' });
    expect(added.status).toBe(201);
    expect(added.body).toMatchObject({
      domain: 'shop.example.test',
      app: 'shop',
      status: 'pending_dns',
      redirectTo: null,
      dns: {
        proof: {
          type: 'TXT',
          name: '_pier-challenge.shop.example.test',
          value: expect.any(String),
        },
        point: { type: 'CNAME', name: 'shop.example.test', value: 'edge.pier.test' },
      },
    });
    // No TXT yet: the check says why and keeps the name pending.
    const pending = await waitFor('shop', 'shop.example.test', 'pending_dns');
    for (let i = 0; i < 50 && !(await call('GET', '/v1/apps/shop/domains')).body[0].error; i++)
      await new Promise((r) => setTimeout(r, 100));
    const withReason = (await call('GET', '/v1/apps/shop/domains')).body[0];
    expect(withReason.error).toMatch(/_pier-challenge\.shop\.example\.test/);
    expect(withReason.attempts).toBeGreaterThanOrEqual(1);
    expect(pending.domain).toBe('shop.example.test');

    await dns.setTxt('_pier-challenge.shop.example.test', added.body.dns.proof.value);
    const check = await call('POST', '/v1/apps/shop/domains/shop.example.test/check');
    expect(check.status).toBe(200);
    expect(check.body).toMatchObject({ status: 'queued', domain: 'shop.example.test' });
    const issued = await waitFor('shop', 'shop.example.test', 'cert_issued');
    expect(issued.certNotAfter).toEqual(expect.any(String));
    expect(issued.verifiedAt).toEqual(expect.any(String));

    // The certificate verifies against pebble's root; the edge hands the request to the
    // proxy, which routes it to the app (no machine yet: the proxy's own 503).
    const root = await pebble.root();
    const res = await httpsGet('shop.example.test', root);
    expect(res.status).toBe(503);
    expect(JSON.parse(res.body)).toMatchObject({ code: 'unavailable' });
    // Without pebble's root the certificate is not trusted.
    await expect(httpsGet('shop.example.test', '')).rejects.toThrow();
    // The TLS context is built once: a reload with the same certificates builds none.
    const memory = edgeMemory(tp.platform.ctx);
    const built = memory.contextsBuilt;
    await reloadEdgeTable(tp.platform.ctx);
    expect((await httpsGet('shop.example.test', root)).fingerprint).toBe(res.fingerprint);
    expect(memory.contextsBuilt).toBe(built);
    // The key is sealed at rest.
    const row = await tp.platform.ctx.db
      .selectFrom('edge_certificates')
      .selectAll()
      .where('name', '=', 'shop.example.test')
      .executeTakeFirstOrThrow();
    expect(row.key_sealed.toString('latin1')).not.toContain('PRIVATE KEY');

    // Plain HTTP for a name with a certificate: 308 to HTTPS.
    const plain = await plainGet('shop.example.test', '/path?q=1');
    expect(plain.status).toBe(308);
    expect(plain.location).toBe(`https://shop.example.test:${tlsPort}/path?q=1`);
  }, 120_000);

  it('redirects to another hostname of the same app with a 308', async () => {
    await dns.setTxt('_pier-challenge.www.example.test', 'x');
    const www = await call('POST', '/v1/apps/shop/domains', { domain: 'www.example.test' });
    await dns.setTxt('_pier-challenge.www.example.test', www.body.dns.proof.value);
    await call('POST', '/v1/apps/shop/domains/www.example.test/check');
    await waitFor('shop', 'www.example.test', 'cert_issued');
    const bad = await call('PUT', '/v1/apps/shop/domains/www.example.test/redirect', {
      to: 'blog.example.test',
    });
    expect(bad.status).toBe(400);
    const set = await call('PUT', '/v1/apps/shop/domains/www.example.test/redirect', {
      to: 'shop.example.test',
    });
    expect(set.status).toBe(200);
    expect(set.body.redirectTo).toBe('shop.example.test');
    const res = await httpsGet('www.example.test', await pebble.root(), '/a?b=c');
    expect(res.status).toBe(308);
    expect(res.headers.location).toBe(`https://shop.example.test:${tlsPort}/a?b=c`);
    const cleared = await call('PUT', '/v1/apps/shop/domains/www.example.test/redirect', {
      to: null,
    });
    expect(cleared.body.redirectTo).toBeNull();
  }, 120_000);

  it('keeps a name that does not point at the edge pending, with the reason', async () => {
    const d = await call('POST', '/v1/apps/blog/domains', { domain: 'blog.elsewhere.test' });
    await dns.setTxt('_pier-challenge.blog.elsewhere.test', d.body.dns.proof.value);
    await dns.addA('blog.elsewhere.test', ['192.0.2.7']);
    await call('POST', '/v1/apps/blog/domains/blog.elsewhere.test/check');
    for (let i = 0; i < 100; i++) {
      const got = (await call('GET', '/v1/apps/blog/domains')).body[0];
      if (got.error?.includes('does not point')) return;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error('no pointing error');
  });

  it('refuses bad input, platform names, and names held by others', async () => {
    const bad = async (body: unknown) => call('POST', '/v1/apps/shop/domains', body);
    for (const body of [
      {},
      { domain: '' },
      { domain: 'a'.repeat(254) },
      { domain: '*.example.test' },
      { domain: 'localhost' },
      { domain: 'bad_label.example.test' },
      { domain: '-x.example.test' },
      { domain: '10.0.0.1' },
      { domain: 'x.test', extra: 1 },
      { domain: 5 },
    ]) {
      const res = await bad(body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.code).toBe('bad-request');
    }
    const shadow = await bad({ domain: 'blog.127.0.0.1.nip.test' });
    expect(shadow.status).toBe(201);
    for (const domain of ['edge.pier.test', 'rival.edge.pier.test']) {
      const res = await bad({ domain });
      expect(res.status).toBe(409);
      expect(res.body.code).toBe('shadows-default-address');
    }
    expect((await bad({ domain: 'shop.example.test' })).body.code).toBe('already-exists');
    const taken = await call(
      'POST',
      '/v1/apps/rival/domains',
      { domain: 'shop.example.test' },
      other.token,
    );
    expect(taken.status).toBe(409);
    expect(taken.body.code).toBe('conflict');
  });

  it("answers another organization's domains like missing ones, refuses read-only keys", async () => {
    const t = other.token;
    for (const [method, p, body] of [
      ['GET', '/v1/apps/shop/domains'],
      ['POST', '/v1/apps/shop/domains', { domain: 'x.other.test' }],
      ['POST', '/v1/apps/shop/domains/shop.example.test/check'],
      ['PUT', '/v1/apps/shop/domains/shop.example.test/redirect', { to: null }],
      ['DELETE', '/v1/apps/shop/domains/shop.example.test'],
      ['POST', '/v1/apps/rival/domains/shop.example.test/check'],
      ['DELETE', '/v1/apps/rival/domains/shop.example.test'],
    ] as const) {
      const res = await call(method, p, body, t);
      expect(res.status, `${method} ${p}`).toBe(404);
      expect(res.body.code).toBe('not-found');
    }
    const key = await call('POST', '/v1/tokens', { name: 'ro', scopes: ['read'] });
    expect(key.status).toBe(201);
    const ro = key.body.token;
    expect((await call('GET', '/v1/apps/shop/domains', undefined, ro)).status).toBe(200);
    for (const [method, p, body] of [
      ['POST', '/v1/apps/shop/domains', { domain: 'ro.example.test' }],
      ['POST', '/v1/apps/shop/domains/shop.example.test/check'],
      ['PUT', '/v1/apps/shop/domains/shop.example.test/redirect', { to: null }],
      ['DELETE', '/v1/apps/shop/domains/shop.example.test'],
    ] as const) {
      const res = await call(method, p, body, ro);
      expect(res.status, `${method} ${p}`).toBe(403);
      expect(res.body.code).toBe('token-scope');
    }
  });

  it('renews when the row says so: the sweep queues the check, a new certificate follows', async () => {
    const before = await waitFor('shop', 'shop.example.test', 'cert_issued');
    const old = await tp.platform.ctx.db
      .selectFrom('edge_certificates')
      .select('chain_pem')
      .where('name', '=', 'shop.example.test')
      .executeTakeFirstOrThrow();
    // Renewal time reached (as the check set it, a third of the lifetime before expiry).
    await tp.platform.ctx.db
      .updateTable('edge_domains')
      .set({ next_check_at: new Date(Date.now() - 1000) })
      .where('domain', '=', 'shop.example.test')
      .execute();
    let after: any = before;
    for (let i = 0; i < 150 && after.certIssuedAt === before.certIssuedAt; i++) {
      await new Promise((r) => setTimeout(r, 100));
      after = (await call('GET', '/v1/apps/shop/domains')).body.find(
        (d: { domain: string }) => d.domain === 'shop.example.test',
      );
    }
    expect(after.status).toBe('cert_issued');
    expect(after.certIssuedAt).not.toBe(before.certIssuedAt);
    expect(after.attempts).toBeGreaterThan(before.attempts);
    const renewed = await tp.platform.ctx.db
      .selectFrom('edge_certificates')
      .select('chain_pem')
      .where('name', '=', 'shop.example.test')
      .executeTakeFirstOrThrow();
    expect(renewed.chain_pem).not.toBe(old.chain_pem);
    // The edge serves the new certificate (its cached context went with the old one).
    const served = await httpsGet('shop.example.test', await pebble.root());
    expect(served.status).toBe(503);
    expect(served.fingerprint).toBe(new X509Certificate(renewed.chain_pem).fingerprint256);
  }, 60_000);

  it("learns of another replica's change on its notice, not at the next reload", async () => {
    const { ctx } = tp.platform;
    const memory = edgeMemory(ctx);
    const redirectOf = () => memory.table?.domains.get('www.example.test')?.redirectTo;
    expect(redirectOf()).toBeUndefined();
    // As another replica's setRedirect: the row, and the notice in its transaction.
    await ctx.db.transaction().execute(async (tx) => {
      await tx
        .updateTable('edge_domains')
        .set({ redirect_to: 'shop.example.test' })
        .where('domain', '=', 'www.example.test')
        .execute();
      await announceEdgeChange(tx);
    });
    const started = performance.now();
    while (!redirectOf() && performance.now() - started < 3000)
      await new Promise((r) => setTimeout(r, 5));
    expect(redirectOf()).toBe('shop.example.test');
    // The timed reload comes every 30 s; the notice's within a busy host's round trip.
    expect(performance.now() - started).toBeLessThan(2000);
    await call('PUT', '/v1/apps/shop/domains/www.example.test/redirect', { to: null });
  });

  it("deletes an app's domains with it: certificates, keys and queued checks go", async () => {
    expect((await call('POST', '/v1/apps', { name: 'gone' })).status).toBe(201);
    const d = await call('POST', '/v1/apps/gone/domains', { domain: 'gone.example.test' });
    await dns.setTxt('_pier-challenge.gone.example.test', d.body.dns.proof.value);
    await call('POST', '/v1/apps/gone/domains/gone.example.test/check');
    await waitFor('gone', 'gone.example.test', 'cert_issued');
    const root = await pebble.root();
    expect((await httpsGet('gone.example.test', root)).status).toBe(503);
    const { db } = tp.platform.ctx;
    const { id } = await db
      .selectFrom('edge_domains')
      .select('id')
      .where('domain', '=', 'gone.example.test')
      .executeTakeFirstOrThrow();
    // A renewal under way while the app goes: queued, or already ordering.
    await db
      .updateTable('edge_domains')
      .set({ next_check_at: new Date(Date.now() - 1000) })
      .where('domain', '=', 'gone.example.test')
      .execute();
    await call('POST', '/v1/apps/gone/domains/gone.example.test/check');
    expect((await call('DELETE', '/v1/apps/gone')).status).toBe(204);
    await expect(httpsGet('gone.example.test', root)).rejects.toThrow();
    const checks = () =>
      db
        .selectFrom('jobs')
        .select('state')
        .where('dedupe_key', '=', id)
        .where('state', 'in', ['queued', 'running'])
        .execute();
    for (let i = 0; i < 100 && (await checks()).some((j) => j.state === 'running'); i++)
      await new Promise((r) => setTimeout(r, 100));
    expect(await checks()).toEqual([]);
    // A check that was ordering stored nothing once it finished: nothing is left.
    for (const table of ['edge_certificates', 'edge_domains'] as const) {
      const column = table === 'edge_certificates' ? 'name' : 'domain';
      const left = await db
        .selectFrom(table)
        .select(column)
        .where(column, '=', 'gone.example.test')
        .execute();
      expect(left, table).toEqual([]);
    }
    await expect(httpsGet('gone.example.test', root)).rejects.toThrow();
    // The name is free for another app.
    expect(
      (await call('POST', '/v1/apps/blog/domains', { domain: 'gone.example.test' })).status,
    ).toBe(201);
    expect((await call('DELETE', '/v1/apps/blog/domains/gone.example.test')).status).toBe(204);
  }, 60_000);

  it('deletes a domain: it stops routing and its certificate goes', async () => {
    expect((await call('DELETE', '/v1/apps/shop/domains/www.example.test')).status).toBe(204);
    expect((await call('DELETE', '/v1/apps/shop/domains/www.example.test')).status).toBe(404);
    await expect(httpsGet('www.example.test', await pebble.root())).rejects.toThrow();
  });
});

describe('claims across organizations (issue 24)', () => {
  const rivalCall = (method: string, p: string, body?: unknown) =>
    call(method, p, body, other.token);

  it('lets another org take a name this org only claimed: the first proof wins, the loser ends with the reason', async () => {
    const mine = await call('POST', '/v1/apps/blog/domains', { domain: 'race.example.test' });
    expect(mine.status).toBe(201);
    // The claim without a proof holds nothing: another org adds the same name.
    const theirs = await rivalCall('POST', '/v1/apps/rival/domains', {
      domain: 'race.example.test',
    });
    expect(theirs.status, JSON.stringify(theirs.body)).toBe(201);
    await dns.setTxt('_pier-challenge.race.example.test', theirs.body.dns.proof.value);
    await rivalCall('POST', '/v1/apps/rival/domains/race.example.test/check');
    await waitFor('rival', 'race.example.test', 'cert_issued', other.token);
    const lost = await waitFor('blog', 'race.example.test', 'error');
    expect(lost.error).toMatch(
      /Another organization proved the domain 'race\.example\.test' first/,
    );
    expect(lost.verifiedAt).toBeUndefined();
    // An ended claim is not checked again, even asked to.
    const attempts = lost.attempts;
    expect((await call('POST', '/v1/apps/blog/domains/race.example.test/check')).status).toBe(200);
    await new Promise((r) => setTimeout(r, 1500));
    expect(await waitFor('blog', 'race.example.test', 'error')).toMatchObject({ attempts });
    // The proven name is the other org's: this org cannot add it again, nor can its
    // ended claim's removal take the winner's certificate.
    expect((await call('DELETE', '/v1/apps/blog/domains/race.example.test')).status).toBe(204);
    const again = await call('POST', '/v1/apps/blog/domains', { domain: 'race.example.test' });
    expect([again.status, again.body.code]).toEqual([409, 'conflict']);
    expect((await httpsGet('race.example.test', await pebble.root())).status).toBe(503);
    expect((await rivalCall('DELETE', '/v1/apps/rival/domains/race.example.test')).status).toBe(
      204,
    );
  }, 120_000);

  it('ends a claim left unproven for 7 days, and only then', async () => {
    const { db } = tp.platform.ctx;
    for (const domain of ['stale.example.test', 'fresh.example.test'])
      expect((await call('POST', '/v1/apps/blog/domains', { domain })).status).toBe(201);
    // Rows made that long ago (created_at is written once, by the database: raw SQL).
    const backdate = (domain: string, age: string) =>
      sql`UPDATE edge_domains SET created_at = now() - ${age}::interval WHERE domain = ${domain}`.execute(
        db,
      );
    await backdate('stale.example.test', '7 days 1 minute');
    await backdate('fresh.example.test', '6 days 23 hours');
    // The sweep (every 5 s) ends it.
    const ended = await waitFor('blog', 'stale.example.test', 'error');
    expect(ended.error).toMatch(/Not proven within 7 days/);
    const fresh = (await call('GET', '/v1/apps/blog/domains')).body.find(
      (d: { domain: string }) => d.domain === 'fresh.example.test',
    );
    expect(fresh.status).toBe('pending_dns');
    for (const domain of ['stale.example.test', 'fresh.example.test'])
      expect((await call('DELETE', `/v1/apps/blog/domains/${domain}`)).status).toBe(204);
  }, 60_000);

  it('refuses public suffixes with 400, and accepts names below them', async () => {
    for (const domain of ['co.uk', 'github.io', 'com', 'CO.UK.']) {
      const res = await call('POST', '/v1/apps/blog/domains', { domain });
      expect([res.status, res.body.code], domain).toEqual([400, 'bad-request']);
      expect(res.body.issues[0]).toMatchObject({ path: 'domain' });
      expect(res.body.issues[0].message).toMatch(/is a public suffix/);
    }
    for (const domain of ['foo.co.uk', 'me.github.io']) {
      expect((await call('POST', '/v1/apps/blog/domains', { domain })).status, domain).toBe(201);
      expect((await call('DELETE', `/v1/apps/blog/domains/${domain}`)).status).toBe(204);
    }
  });
});
