/**
 * The services listener serves the app's routes over TLS that the platform CA verifies,
 * and answers only on the services host: a connection to another address of the host
 * (here 127.0.0.2, which loopback also answers) is dropped before TLS.
 */
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

it('drops connections to any other address of the host', async () => {
  await expect(get('127.0.0.2', ca)).rejects.toThrow(/ECONNRESET|socket hang up|disconnected/);
});

it('says which setting to change when its port is taken', async () => {
  const config = { servicesHost: '127.0.0.1', servicesPort: listener.port };
  const files = { certFile: path.join(dir, 'server.pem'), keyFile: path.join(dir, 'server.key') };
  await expect(
    startServicesListener(app, config, files, pino({ level: 'silent' })),
  ).rejects.toThrow(/PIER_SERVICES_PORT/);
});
