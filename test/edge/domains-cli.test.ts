/**
 * `pier domains` and `pier zones` against a real server: the records to set, the
 * pending status with its reason (read from a DNS server on loopback that holds none of
 * them), check, redirect, remove; a zone's claim, show, check and release, and
 * `zones-unavailable`; another organization's app, a read-only key, bad input. No ACME
 * CA: statuses stay `pending_dns`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestOrg, type TestPlatform } from '../helpers/platform.js';
import { pierWith, startCliBed, type CliBed } from '../cli/run-cli.js';
import { freePort, startDnsServer, type DnsServer } from './acme-servers.js';

let tp: TestPlatform;
let org: TestOrg;
let tmp: CliBed['tmp'];
let env: Record<string, string>;
let dns: DnsServer;
const pier = pierWith(() => env);

beforeAll(async () => {
  dns = await startDnsServer();
  ({ tp, org, tmp, env } = await startCliBed({
    dnsListen: `127.0.0.1:${await freePort()}`,
    dnsResolver: dns.address,
    edgeAddress: 'edge.pier.test',
  }));
  expect((await pier(['apps', 'create', 'cli-doms'])).code).toBe(0);
}, 60_000);
afterAll(async () => {
  await tp?.close();
  await dns?.close();
  await tmp?.remove();
});

/** Polls the route (not the slower CLI) until `done` holds for its answer. */
async function until<T>(path: string, done: (v: T) => boolean): Promise<T> {
  let v: T | undefined;
  for (let i = 0; i < 150; i++) {
    v = (await tp.request('GET', path, { token: org.token })).body as T;
    if (done(v)) return v;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${path}: never ready: ${JSON.stringify(v)}`);
}

describe('pier domains', () => {
  it('adds a domain with its records, shows why it is pending, redirects and removes', async () => {
    expect((await pier(['domains', 'list', 'cli-doms'])).stdout).toBe(
      'No custom domains on cli-doms.\n',
    );
    const add = await pier(['domains', 'add', 'cli-doms', 'WWW.Shop.test']);
    expect(add.code, add.stderr).toBe(0);
    expect(add.stdout).toMatch(/^Domain:\s+www\.shop\.test$/m);
    expect(add.stdout).toMatch(/^Status:\s+pending_dns$/m);
    expect(add.stdout).toMatch(/^proof\s+TXT\s+_pier-challenge\.www\.shop\.test\s+\S+$/m);
    expect(add.stdout).toMatch(/^point\s+CNAME\s+www\.shop\.test\s+edge\.pier\.test$/m);
    expect(add.stdout).toContain('pier domains check cli-doms www.shop.test');

    // The check the add queued reads the loopback DNS, which has no TXT record.
    await until<{ error?: string }[]>('/v1/apps/cli-doms/domains', (l) => !!l[0]?.error);
    const list = await pier(['domains', 'list', 'cli-doms']);
    expect(list.stdout).toMatch(/^DOMAIN\s+STATUS\s+CHECKS\s+CERT EXPIRES\s+REDIRECT\s+REASON$/m);
    expect(list.stdout).toMatch(
      /^www\.shop\.test\s+pending_dns\s+\d+\s+-\s+-\s+The TXT record _pier-challenge\.www\.shop\.test does not hold/m,
    );

    const check = await pier(['domains', 'check', 'cli-doms', 'www.shop.test']);
    expect(check.stdout).toMatch(/^Check of www\.shop\.test queued\./);
    expect(check.stdout).toMatch(/^Reason:\s+The TXT record/m);

    expect((await pier(['domains', 'add', 'cli-doms', 'api.shop.test'])).code).toBe(0);
    const to = await pier(['domains', 'redirect', 'cli-doms', 'api.shop.test', 'www.shop.test']);
    expect(to.stdout).toBe('api.shop.test redirects to www.shop.test.\n');
    const json = await pier(['domains', 'list', 'cli-doms', '--json']);
    expect(JSON.parse(json.stdout)).toContainEqual(
      expect.objectContaining({ domain: 'api.shop.test', redirectTo: 'www.shop.test' }),
    );
    const clear = await pier(['domains', 'redirect', 'cli-doms', 'api.shop.test', '--clear']);
    expect(clear.stdout).toBe('api.shop.test no longer redirects.\n');
    const neither = await pier(['domains', 'redirect', 'cli-doms', 'api.shop.test']);
    expect([neither.code, neither.stderr]).toEqual([
      1,
      'pier: give either the name to redirect to or --clear\n',
    ]);
    const elsewhere = await pier(['domains', 'redirect', 'cli-doms', 'api.shop.test', 'x.test']);
    expect(elsewhere.code).toBe(1);
    expect(elsewhere.stderr).toContain('(bad-request)');

    for (const d of ['api.shop.test', 'www.shop.test']) {
      const rm = await pier(['domains', 'remove', 'cli-doms', d]);
      expect(rm.stdout).toBe(`Removed ${d} from cli-doms.\n`);
    }
    expect(JSON.parse((await pier(['domains', 'list', 'cli-doms', '--json'])).stdout)).toEqual([]);
  }, 60_000);

  it('reports bad input, another organization and a read-only key plainly', async () => {
    const wild = await pier(['domains', 'add', 'cli-doms', '*.shop.test']);
    expect(wild.code).toBe(1);
    expect(wild.stderr).toMatch(/\(bad-request\)\n {2}- domain: /);

    const rival = await tp.createOrg();
    const made = await tp.request('POST', '/v1/apps', {
      token: rival.token,
      body: { name: 'rival-doms' },
    });
    expect(made.status).toBe(201);
    for (const args of [
      ['domains', 'list', 'rival-doms'],
      ['domains', 'add', 'rival-doms', 'r.shop.test'],
      ['domains', 'remove', 'rival-doms', 'r.shop.test'],
    ]) {
      const r = await pier(args);
      expect([r.code, r.stderr]).toEqual([1, expect.stringContaining('(not-found)')]);
    }

    const ro = await tp.request('POST', '/v1/tokens', {
      token: org.token,
      body: { name: 'ro', scopes: ['read'] },
    });
    const asRo = { env: { PIER_API_KEY: ro.body.token as string } };
    expect((await pier(['domains', 'list', 'cli-doms'], asRo)).code).toBe(0);
    const refused = await pier(['domains', 'add', 'cli-doms', 'ro.shop.test'], asRo);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/\(token-scope\)$/m);
    const refusedZone = await pier(['zones', 'claim', 'ro.test'], asRo);
    expect(refusedZone.stderr).toMatch(/\(token-scope\)$/m);
  }, 60_000);
});

describe('pier zones', () => {
  it('claims a zone with its records, shows why it is pending, checks and releases', async () => {
    expect((await pier(['zones', 'list'])).stdout).toBe('No zones.\n');
    const claim = await pier(['zones', 'claim', 'cli.test']);
    expect(claim.code, claim.stderr).toBe(0);
    expect(claim.stdout).toMatch(/^Zone:\s+cli\.test$/m);
    expect(claim.stdout).toMatch(/^Status:\s+pending_dns$/m);
    expect(claim.stdout).toMatch(
      /^acme\s+CNAME\s+_acme-challenge\.cli\.test\s+[a-z0-9]+\.acme\.edge\.pier\.test$/m,
    );
    expect(claim.stdout).toMatch(/^point\s+CNAME\s+\*\.cli\.test\s+edge\.pier\.test$/m);

    await until<{ error?: string }>('/v1/domains/zones/cli.test', (z) => !!z.error);
    const show = await pier(['zones', 'show', 'cli.test']);
    expect(show.stdout).toMatch(/^Reason:\s+_acme-challenge\.cli\.test is not a CNAME to /m);
    expect(show.stdout).toMatch(/^Checks:\s+[1-9]\d*$/m);
    expect(show.stdout).toMatch(/^Last checked:\s+\d{4}-\d\d-\d\d \d\d:\d\dZ$/m);
    expect((await pier(['zones', 'list'])).stdout).toMatch(
      /^cli\.test\s+pending_dns\s+\d+\s+\S+ \S+\s+-\s+_acme-challenge/m,
    );
    expect((await pier(['zones', 'check', 'cli.test'])).stdout).toMatch(
      /^Check of cli\.test queued\./,
    );
    expect((await pier(['zones', 'claim', 'cli.test', '--json'])).code).toBe(0); // already ours

    expect((await pier(['zones', 'release', 'cli.test'])).stdout).toBe('Released zone cli.test.\n');
    const gone = await pier(['zones', 'show', 'cli.test']);
    expect([gone.code, gone.stderr]).toEqual([1, expect.stringContaining('(not-found)')]);
  }, 60_000);

  it('says zones-unavailable where the edge DNS does not run', async () => {
    const saved = tp.platform.config.dnsListen;
    tp.platform.config.dnsListen = undefined;
    try {
      const r = await pier(['zones', 'claim', 'nodns.test']);
      expect(r.code).toBe(1);
      expect(r.stderr).toBe(
        'pier: Zones need the DNS server of the edge (PIER_DNS_LISTEN), which this installation does not run. (zones-unavailable)\n',
      );
    } finally {
      tp.platform.config.dnsListen = saved;
    }
  });
});
