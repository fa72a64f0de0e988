/**
 * The services listener serves the app's routes over TLS that the platform CA verifies,
 * and listens only on the services host: another address of the host (here 127.0.0.2,
 * which loopback also answers) has nothing on its port. A services host the host does not
 * have yet (the machines' bridge, made with the first machine) is waited for.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import Fastify from 'fastify';
import pino from 'pino';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { ensureCa } from '../crypto/ca.js';
import { startServicesListener, type ServicesListener } from './services-listener.js';

let dir: string;
let ca: string;
let listener: ServicesListener;
const app = Fastify();
app.get('/hello', async (req) => ({ hello: req.protocol }));

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'pier-services-'));
  const files = await ensureCa(dir, ['127.0.0.1']);
  ca = await readFile(files.caFile, 'utf8');
  await app.ready();
  const config = { servicesHost: '127.0.0.1', servicesPort: 0 };
  listener = await startServicesListener(app, config, files, pino({ level: 'silent' }));
});

afterAll(async () => {
  await listener?.close();
  await app.close();
  await rm(dir, { recursive: true, force: true });
});

/** GET /hello on `host`, verifying the certificate (chain and name) with `trust`. */
function get(host: string, trust: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = https.get({ host, port: listener.port, path: '/hello', ca: trust }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c));
      res.on('end', () => resolve(body));
    });
    req.on('error', reject);
  });
}

it('serves the app over TLS verified with the platform CA', async () => {
  expect(JSON.parse(await get('127.0.0.1', ca))).toEqual({ hello: 'https' });
});

it('is refused by a client trusting another CA', async () => {
  const other = await ensureCa(path.join(dir, 'other'), ['127.0.0.1']);
  await expect(get('127.0.0.1', await readFile(other.caFile, 'utf8'))).rejects.toThrow(
    /self-signed|unable to verify|issuer/i,
  );
});

/** Local addresses of the TCP sockets listening on `port`, as `ss` shows them. */
async function listeningOn(port: number): Promise<string[]> {
  const { stdout } = await promisify(execFile)('ss', ['-ltnH']);
  return stdout
    .split('\n')
    .map((line) => line.trim().split(/\s+/)[3] ?? '')
    .filter((local) => local.endsWith(`:${port}`));
}

it('listens on the services host alone, not on every interface', async () => {
  expect(listener.address()).toMatchObject({ address: '127.0.0.1', port: listener.port });
  expect(await listeningOn(listener.port)).toEqual([`127.0.0.1:${listener.port}`]);
  await expect(get('127.0.0.2', ca)).rejects.toThrow(/ECONNREFUSED/);
});

it('waits for a services host the host does not have yet, with its port chosen', async () => {
  // 198.51.100.0/24 is documentation space: no host has it.
  const config = { servicesHost: '198.51.100.77', servicesPort: 0 };
  const files = { certFile: path.join(dir, 'server.pem'), keyFile: path.join(dir, 'server.key') };
  const waiting = await startServicesListener(app, config, files, pino({ level: 'silent' }));
  try {
    expect(waiting.port).toBeGreaterThan(0);
    expect(waiting.address()).toBeUndefined();
    await waiting.bind(); // still missing: it keeps waiting, and nothing listens anywhere
    expect(waiting.address()).toBeUndefined();
    expect(await listeningOn(waiting.port)).toEqual([]);
  } finally {
    await waiting.close();
  }
});

it('says which setting to change when its port is taken', async () => {
  const config = { servicesHost: '127.0.0.1', servicesPort: listener.port };
  const files = { certFile: path.join(dir, 'server.pem'), keyFile: path.join(dir, 'server.key') };
  await expect(
    startServicesListener(app, config, files, pino({ level: 'silent' })),
  ).rejects.toThrow(/PIER_SERVICES_PORT/);
});
