/**
 * The outbound guard: which addresses it refuses, what names resolving to them get, the
 * settings that let a target through, and that fetch checks every hop and connects to the
 * addresses it checked. Names are resolved by a fake (no real DNS); the servers are local
 * and only ever receive connects the guard allowed.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import {
  OutboundGuard,
  OutboundRefused,
  classifyAddress,
  parseTrustedTarget,
  type ResolvedAddress,
} from './outbound-guard.js';

const PUBLIC_V4 = '93.184.215.14';
const PUBLIC_V6 = '2606:2800:21f:cb07:6820:80da:af6b:8b2c';

/** A fake resolver: `names` maps a name to its addresses; it counts what it was asked. */
function fakeResolver(names: Record<string, string[]>) {
  const asked: string[] = [];
  const resolve = async (name: string): Promise<ResolvedAddress[]> => {
    asked.push(name);
    const list = names[name];
    if (!list)
      throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${name}`), { code: 'ENOTFOUND' });
    return list.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  };
  return { resolve, asked };
}

async function refusal(p: Promise<unknown>): Promise<OutboundRefused> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(OutboundRefused);
  return err as OutboundRefused;
}

describe('classifyAddress', () => {
  const refused: [string, RegExp][] = [
    // IPv4
    ['0.0.0.0', /unspecified/],
    ['0.1.2.3', /unspecified/],
    ['10.0.0.5', /private/],
    ['10.255.255.255', /private/],
    ['100.64.0.1', /CGNAT/],
    ['100.127.255.254', /CGNAT/],
    ['127.0.0.1', /loopback/],
    ['127.8.9.10', /loopback/],
    ['169.254.0.1', /link-local/],
    ['169.254.169.254', /metadata/],
    ['169.254.170.2', /metadata/],
    ['100.100.100.200', /metadata/],
    ['172.16.0.1', /private/],
    ['172.31.255.255', /private/],
    ['192.0.0.1', /reserved/],
    ['192.0.2.1', /documentation/],
    ['192.168.1.1', /private/],
    ['198.18.0.1', /benchmarking/],
    ['198.51.100.7', /documentation/],
    ['203.0.113.9', /documentation/],
    ['224.0.0.1', /multicast/],
    ['239.255.255.250', /multicast/],
    ['240.0.0.1', /reserved/],
    ['255.255.255.255', /reserved/],
    // IPv6
    ['::', /unspecified/],
    ['::1', /loopback/],
    ['0:0:0:0:0:0:0:1', /loopback/],
    ['fe80::1', /link-local/],
    ['fe80::1%eth0', /link-local/],
    ['febf::1', /link-local/],
    ['fc00::1', /private/],
    ['fd12:3456::1', /private/],
    ['fd00:ec2::254', /metadata/],
    ['fec0::1', /site-local/],
    ['ff02::1', /multicast/],
    ['2001:db8::1', /documentation/],
    ['2001::1', /reserved/], // Teredo
    ['100::1', /discard/],
    ['::1.2.3.4', /IPv4-compatible/],
    ['1::1', /outside global unicast/],
    // IPv4 inside IPv6
    ['::ffff:127.0.0.1', /loopback address \(IPv4-mapped 127\.0\.0\.1\)/],
    ['::ffff:7f00:1', /loopback address \(IPv4-mapped 127\.0\.0\.1\)/],
    ['::ffff:10.0.0.5', /private address \(IPv4-mapped 10\.0\.0\.5\)/],
    ['::ffff:a9fe:a9fe', /metadata address \(IPv4-mapped 169\.254\.169\.254\)/],
    ['::ffff:100.64.0.1', /CGNAT/],
    ['::ffff:0.0.0.0', /unspecified/],
    ['64:ff9b::a00:5', /private address \(NAT64 of 10\.0\.0\.5\)/],
    ['64:ff9b:1::1', /local NAT64/],
    ['2002:7f00:1::1', /loopback address \(6to4 of 127\.0\.0\.1\)/],
    ['2002:c0a8:101::1', /private address \(6to4 of 192\.168\.1\.1\)/],
    // not addresses at all
    ['localhost', /not an IP address/],
    ['', /not an IP address/],
  ];
  it.each(refused)('refuses %s', (ip, why) => {
    expect(classifyAddress(ip)).toMatch(why);
  });

  const allowed = [
    PUBLIC_V4,
    '8.8.8.8',
    '1.1.1.1',
    '172.32.0.1', // just past 172.16/12
    '100.128.0.1', // just past 100.64/10
    '169.253.255.255',
    '11.0.0.1',
    PUBLIC_V6,
    '2a00:1450:4001:81b::200e',
    '::ffff:8.8.8.8',
    '64:ff9b::808:808',
    '2002:808:808::1',
  ];
  it.each(allowed)('lets %s through', (ip) => {
    expect(classifyAddress(ip)).toBeUndefined();
  });
});

describe('check', () => {
  it('allows a name whose every address is public, and answers those addresses', async () => {
    const dns = fakeResolver({ 'registry.example': [PUBLIC_V4, PUBLIC_V6] });
    const guard = new OutboundGuard({ resolve: dns.resolve });
    const target = await guard.check('https://registry.example/v2/');
    expect(target).toEqual({
      hostname: 'registry.example',
      port: 443,
      addresses: [
        { address: PUBLIC_V4, family: 4 },
        { address: PUBLIC_V6, family: 6 },
      ],
      trusted: false,
    });
    expect(dns.asked).toEqual(['registry.example']);
  });

  it('refuses a name that resolves to a private address, naming it and the way out', async () => {
    const dns = fakeResolver({ 'evil.example': ['10.0.0.5'] });
    const guard = new OutboundGuard({ resolve: dns.resolve });
    const err = await refusal(guard.check('https://evil.example:5000/v2/'));
    expect(err.code).toBe('target-refused');
    expect(err.target).toBe('evil.example:5000');
    expect(err.address).toBe('10.0.0.5');
    expect(err.message).toBe(
      'Connecting to evil.example:5000 is refused: 10.0.0.5 is a private address; an operator can allow it with PIER_ALLOW_PRIVATE_TARGETS=1 or PIER_TRUSTED_REGISTRIES.',
    );
  });

  it('refuses a name with both a public and a private address', async () => {
    for (const list of [
      [PUBLIC_V4, '127.0.0.1'],
      ['169.254.169.254', PUBLIC_V4],
      [PUBLIC_V6, '::ffff:10.1.2.3'],
      [PUBLIC_V4, 'fd00::1'],
    ]) {
      const dns = fakeResolver({ 'mixed.example': list });
      const guard = new OutboundGuard({ resolve: dns.resolve });
      const err = await refusal(guard.check('https://mixed.example/'));
      expect(list).toContain(err.address);
      expect(classifyAddress(err.address)).toBeDefined();
    }
  });

  it('judges IP literals as they are, in every spelling the URL parser accepts', async () => {
    const dns = fakeResolver({});
    const guard = new OutboundGuard({ resolve: dns.resolve });
    for (const url of [
      'http://127.0.0.1:5432/',
      'http://169.254.169.254/latest/meta-data/',
      'http://2130706433/', // 127.0.0.1 as one number
      'http://0x7f.1/', // 127.0.0.1 in hex, short form
      'http://0/',
      'http://[::1]:5000/',
      'http://[::ffff:127.0.0.1]/',
      'http://[::ffff:a9fe:a9fe]/',
      'http://[fe80::1]/',
      'https://10.0.0.5/',
      'https://[fd00:ec2::254]/',
    ]) {
      await refusal(guard.check(url));
    }
    expect((await guard.check(`https://${PUBLIC_V4}/`)).addresses).toEqual([
      { address: PUBLIC_V4, family: 4 },
    ]);
    expect(dns.asked).toEqual([]); // literals never reach the resolver
  });

  it('lets everything through with allowPrivate', async () => {
    const dns = fakeResolver({ 'db.internal': ['10.0.0.5', '127.0.0.1'] });
    const guard = new OutboundGuard({ allowPrivate: true, resolve: dns.resolve });
    expect((await guard.check('http://db.internal:5432/')).trusted).toBe(true);
    expect((await guard.check('http://169.254.169.254/')).trusted).toBe(true);
  });

  it('lets a trusted host:port through, and only that port; a bare host trusts every port', async () => {
    const dns = fakeResolver({ 'registry.lan': ['192.168.1.10'], 'mirror.lan': ['10.9.9.9'] });
    const guard = new OutboundGuard({
      trusted: ['Registry.LAN:5000', 'mirror.lan', '127.0.0.1:6000', '[::1]:7000'],
      resolve: dns.resolve,
    });
    expect(await guard.check('http://registry.lan:5000/v2/')).toMatchObject({
      trusted: true,
      addresses: [{ address: '192.168.1.10', family: 4 }],
    });
    await refusal(guard.check('http://registry.lan:5001/v2/'));
    await refusal(guard.check('https://registry.lan/v2/'));
    expect((await guard.check('https://mirror.lan/')).trusted).toBe(true);
    expect((await guard.check('http://mirror.lan:8080/')).trusted).toBe(true);
    expect((await guard.check('http://127.0.0.1:6000/')).trusted).toBe(true);
    await refusal(guard.check('http://127.0.0.1:6001/'));
    expect((await guard.check('http://[::1]:7000/')).trusted).toBe(true);
    await refusal(guard.check('http://[::1]:6000/'));
  });

  it('passes resolver failures on as they are', async () => {
    const guard = new OutboundGuard({ resolve: fakeResolver({}).resolve });
    await expect(guard.check('https://nowhere.example/')).rejects.toMatchObject({
      code: 'ENOTFOUND',
    });
  });
});

describe('parseTrustedTarget', () => {
  it('reads host, host:port and [v6]:port, and refuses the rest', () => {
    expect(parseTrustedTarget('registry.lan:5000')).toEqual({ host: 'registry.lan', port: 5000 });
    expect(parseTrustedTarget(' Mirror.Lan ')).toEqual({ host: 'mirror.lan' });
    expect(parseTrustedTarget('[::1]:5000')).toEqual({ host: '::1', port: 5000 });
    for (const bad of ['', 'a:b', 'host:70000', 'http://host', 'a b', 'host:0']) {
      expect(() => parseTrustedTarget(bad)).toThrow(/HOST or HOST:PORT/);
    }
  });
});

// ---------------------------------------------------------------------------------------
// fetch and lookup, against local servers

interface Server {
  port: number;
  url: string;
  requests: { method: string; path: string; authorization?: string }[];
}
const servers: http.Server[] = [];
afterEach(async () => {
  await Promise.all(
    servers.splice(0).map(
      (s) =>
        new Promise<void>((r) => {
          s.closeAllConnections();
          s.close(() => r());
        }),
    ),
  );
});

async function serve(
  answer: (req: http.IncomingMessage, res: http.ServerResponse) => void = (_q, res) =>
    res.end('hello'),
): Promise<Server> {
  const requests: Server['requests'] = [];
  const server = http.createServer((req, res) => {
    requests.push({
      method: req.method ?? '',
      path: req.url ?? '',
      ...(req.headers.authorization ? { authorization: req.headers.authorization } : {}),
    });
    answer(req, res);
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return { port, url: `http://127.0.0.1:${port}`, requests };
}

describe('fetch', () => {
  it('refuses an untrusted loopback server without connecting, and reaches a trusted one', async () => {
    const s = await serve();
    const err = await refusal(new OutboundGuard().fetch(`${s.url}/x`));
    expect(err.message).toMatch(/127\.0\.0\.1 is a loopback address/);
    expect(s.requests).toEqual([]);

    const res = await new OutboundGuard({ trusted: [`127.0.0.1:${s.port}`] }).fetch(`${s.url}/x`);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('hello');
    expect(s.requests).toEqual([{ method: 'GET', path: '/x' }]);
  });

  it('refuses a name resolving to loopback, and connects to the checked address only', async () => {
    const s = await serve();
    const refusing = fakeResolver({ 'app.example': ['127.0.0.1'] });
    await refusal(
      new OutboundGuard({ resolve: refusing.resolve }).fetch(`http://app.example:${s.port}/`),
    );
    expect(s.requests).toEqual([]);

    // DNS rebinding: the first answer is checked and used; a later, different answer
    // (here an unreachable documentation address) is never asked for.
    let calls = 0;
    const rebinding = async (): Promise<ResolvedAddress[]> =>
      calls++ === 0 ? [{ address: '127.0.0.1', family: 4 }] : [{ address: '192.0.2.1', family: 4 }];
    const guard = new OutboundGuard({ trusted: ['app.example'], resolve: rebinding });
    const res = await guard.fetch(`http://app.example:${s.port}/pinned`);
    expect(await res.text()).toBe('hello');
    expect(calls).toBe(1);
    expect(s.requests).toEqual([{ method: 'GET', path: '/pinned' }]);
  });

  it('checks every redirect hop', async () => {
    const target = await serve();
    const redirecting = (location: string) =>
      serve((_req, res) => {
        res.writeHead(302, { location }).end();
      });
    for (const location of [
      `${target.url}/private`, // another port on loopback: not trusted
      'http://169.254.169.254/latest/meta-data/',
      'http://[::ffff:127.0.0.1]:1/',
      'http://metadata.example/computeMetadata/v1/',
    ]) {
      const hop = await redirecting(location);
      const guard = new OutboundGuard({
        trusted: [`127.0.0.1:${hop.port}`],
        resolve: fakeResolver({ 'metadata.example': ['169.254.169.254'] }).resolve,
      });
      const err = await refusal(guard.fetch(`${hop.url}/start`));
      expect(err.message).toMatch(/is refused: .* is a/);
      expect(hop.requests).toHaveLength(1);
    }
    expect(target.requests).toEqual([]);

    // With the target trusted too, the redirect is followed, without the Authorization.
    const hop = await redirecting(`${target.url}/private`);
    const guard = new OutboundGuard({
      trusted: [`127.0.0.1:${hop.port}`, `127.0.0.1:${target.port}`],
    });
    const res = await guard.fetch(`${hop.url}/start`, { headers: { authorization: 'Bearer t' } });
    expect(await res.text()).toBe('hello');
    expect(hop.requests[0]!.authorization).toBe('Bearer t');
    expect(target.requests).toEqual([{ method: 'GET', path: '/private' }]);

    // redirect: 'manual' hands the 3xx back: the caller follows it through the guard.
    const manual = await guard.fetch(`${hop.url}/start`, { redirect: 'manual' });
    expect(manual.status).toBe(302);
    expect(manual.headers.get('location')).toBe(`${target.url}/private`);
  });

  it('rejects like fetch when the connection fails, and with the reason on abort', async () => {
    const s = await serve();
    const closedPort = s.port;
    await new Promise<void>((r) => {
      servers.pop()!.close(() => r());
    });
    const guard = new OutboundGuard({ allowPrivate: true });
    await expect(guard.fetch(`http://127.0.0.1:${closedPort}/`)).rejects.toMatchObject({
      name: 'TypeError',
      cause: { code: 'ECONNREFUSED' },
    });
    const silent = await serve(() => undefined);
    const controller = new AbortController();
    const pending = guard.fetch(`${silent.url}/`, { signal: controller.signal });
    setTimeout(() => controller.abort(new Error('enough')), 50);
    await expect(pending).rejects.toThrow('enough');
  });
});

describe('lookup', () => {
  it('refuses a name resolving to a private address for http.request, and passes a trusted one', async () => {
    const s = await serve();
    const dns = fakeResolver({ 'internal.example': ['127.0.0.1'], 'ok.internal': ['127.0.0.1'] });
    const guard = new OutboundGuard({ trusted: ['ok.internal'], resolve: dns.resolve });
    const get = (host: string) =>
      new Promise<number>((resolve, reject) => {
        http
          .get({ host, port: s.port, path: '/', lookup: guard.lookup, agent: false }, (res) => {
            res.resume();
            resolve(res.statusCode ?? 0);
          })
          .on('error', reject);
      });
    const err = await get('internal.example').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OutboundRefused);
    expect(s.requests).toEqual([]);
    expect(await get('ok.internal')).toBe(200);
  });
});
