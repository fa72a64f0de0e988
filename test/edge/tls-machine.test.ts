/**
 * HTTPS through the TLS edge all the way to a real machine (issue 17): a zone proven with
 * pebble (wildcard through DNS-01 answered by pier's DNS), then `<app>.<zone>` answers the
 * machine's own page over a certificate verified against pebble's root; password
 * protection holds over HTTPS (401 without, the app with Basic credentials), upgrades
 * included; plain HTTP for the name is sent to HTTPS.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { busyboxLayer } from '../../src/runtime/images/build.test-helper.js';
import { canRunMachines, startMachineBed, type MachineBed } from '../machines/bed.js';
import {
  freePort,
  startDnsServer,
  startPebble,
  type DnsServer,
  type Pebble,
} from './acme-servers.js';

const ZONE = 'tls.test';
const HOST = `site.${ZONE}`;
const PAGE = 'the app over https\n';

let dir: string;
let dns: DnsServer;
let pebble: Pebble;
let bed: MachineBed;
let tlsPort: number;
let root: string;

beforeAll(async () => {
  if (!canRunMachines) return;
  dir = await mkdtemp(path.join(os.tmpdir(), 'pier-tls-machine-'));
  dns = await startDnsServer();
  const [apiPort, dnsPort] = [await freePort(), await freePort()];
  tlsPort = await freePort();
  pebble = await startPebble(dir, {
    dnsServer: `127.0.0.1:${dnsPort}`,
    httpPort: apiPort,
    tlsPort,
  });
  bed = await startMachineBed('pt', 50, {
    listen: `127.0.0.1:${apiPort}`,
    tlsListen: `127.0.0.1:${tlsPort}`,
    dnsListen: `127.0.0.1:${dnsPort}`,
    edgeAddress: 'edge.pier.test',
    acmeDirectoryUrl: pebble.directoryUrl,
    acmeCaFile: pebble.caFile,
    dnsResolver: dns.address,
  });
  const image = await bed.image('site:1', {
    layers: [busyboxLayer(), [{ path: 'www/' }, { path: 'www/index.html', content: PAGE }]],
    config: { Cmd: ['/bin/httpd', '-f', '-p', '3000', '-h', '/www'] },
  });
  expect((await bed.req('POST', '/v1/apps', { name: 'site' })).status).toBe(201);
  // The machine starts while the zone is being proven.
  const [machine, claimed] = await Promise.all([
    bed.req('POST', '/v1/apps/site/machines', { image }),
    bed.req('POST', '/v1/domains/zones', { zone: ZONE }),
  ]);
  expect(machine.status, JSON.stringify(machine.body)).toBe(201);
  expect(claimed.status).toBe(201);
  await dns.setCname(`_acme-challenge.${ZONE}`, `${claimed.body.acmeLabel}.acme.edge.pier.test`);
  expect((await bed.req('POST', `/v1/domains/zones/${ZONE}/check`)).status).toBe(200);
  for (let i = 0; ; i++) {
    const z = (await bed.req('GET', `/v1/domains/zones/${ZONE}`)).body;
    if (z.status === 'cert_issued') break;
    if (i > 600) throw new Error(`zone never issued: ${JSON.stringify(z)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  root = await pebble.root();
}, 180_000);

afterAll(async () => {
  await bed?.close();
  await pebble?.close();
  await dns?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
}

/** A GET through the edge as `host`, verifying the certificate against `ca`. */
function httpsGet(host: string, headers: Record<string, string> = {}, ca = root) {
  return new Promise<Answer>((resolve, reject) => {
    https
      .get(
        {
          host: '127.0.0.1',
          port: tlsPort,
          path: '/index.html',
          servername: host,
          headers: { host, ...headers },
          ca,
          agent: false,
        },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => (text += c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
        },
      )
      .on('error', reject);
  });
}

/** An upgrade request over TLS; everything the edge sends back until it closes. */
function upgradeOverTls(host: string, headers: Record<string, string> = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect(
      { host: '127.0.0.1', port: tlsPort, servername: host, ca: root },
      () => {
        const extra = Object.entries(headers)
          .map(([k, v]) => `${k}: ${v}\r\n`)
          .join('');
        socket.write(
          `GET /index.html HTTP/1.1\r\nHost: ${host}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n` +
            `Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n${extra}\r\n`,
        );
      },
    );
    let text = '';
    socket.setEncoding('utf8');
    socket.on('data', (c: string) => (text += c));
    socket.on('close', () => resolve(text));
    socket.on('error', reject);
  });
}

const basic = (password: string) => ({
  authorization: `Basic ${Buffer.from(`anyone:${password}`).toString('base64')}`,
});

describe.skipIf(!canRunMachines)('HTTPS through the TLS edge to a machine', () => {
  it('answers the machine’s page over a certificate that verifies against pebble', async () => {
    const res = await httpsGet(HOST);
    expect([res.status, res.text]).toEqual([200, PAGE]);
    // Only pebble's root vouches for it.
    await expect(httpsGet(HOST, {}, '')).rejects.toThrow();
    // Plain HTTP for the name is sent to HTTPS on the edge's port.
    const plain = await new Promise<Answer>((resolve, reject) => {
      http
        .get(`${bed.tp.url}/index.html`, { headers: { host: HOST }, agent: false }, (r) => {
          r.resume();
          r.on('end', () => resolve({ status: r.statusCode ?? 0, headers: r.headers, text: '' }));
        })
        .on('error', reject);
    });
    expect(plain.status).toBe(308);
    expect(plain.headers.location).toBe(`https://${HOST}:${tlsPort}/index.html`);
  });

  it('passes an upgrade request through to the machine', async () => {
    // busybox httpd does not speak WebSocket: it answers the request as a plain GET, which
    // proves the upgrade went through the edge and the proxy's tunnel to the machine.
    const answer = await upgradeOverTls(HOST);
    expect(answer).toMatch(/^HTTP\/1\.[01] 200/);
    expect(answer).toContain(PAGE);
  });

  it('enforces password protection over HTTPS, upgrades included', async () => {
    const set = await bed.req('PUT', '/v1/apps/site/protection', { mode: 'password' });
    expect(set.status, JSON.stringify(set.body)).toBe(200);
    const password: string = set.body.password;
    try {
      const none = await httpsGet(HOST);
      expect(none.status).toBe(401);
      expect(none.headers['www-authenticate']).toMatch(/^Basic realm="site"/);
      expect(JSON.parse(none.text).code).toBe('unauthenticated');
      expect((await httpsGet(HOST, basic('wrong'))).status).toBe(401);
      const right = await httpsGet(HOST, basic(password));
      expect([right.status, right.text]).toEqual([200, PAGE]);

      expect(await upgradeOverTls(HOST)).toMatch(/^HTTP\/1\.1 401/);
      const through = await upgradeOverTls(HOST, basic(password));
      expect(through).toMatch(/^HTTP\/1\.[01] 200/);
      expect(through).toContain(PAGE);
    } finally {
      await bed.req('PUT', '/v1/apps/site/protection', { mode: 'public' });
    }
    expect((await httpsGet(HOST)).status).toBe(200);
  });

  it('does not serve another org’s app through the zone', async () => {
    const other = await bed.tp.createOrg();
    const made = await bed.tp.request('POST', '/v1/apps', {
      token: other.token,
      body: { name: 'rival' },
    });
    expect(made.status).toBe(201);
    // The name is below the zone, so the wildcard serves it; the route does not exist.
    expect((await httpsGet(`rival.${ZONE}`)).status).toBe(404);
  });
});
