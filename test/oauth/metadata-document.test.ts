/**
 * Client ID Metadata Documents: a client named by an https URL whose document pier
 * fetches through the outbound guard. The document is served by a loopback https server
 * with its own certificate; a second replica (`pier serve` on the same database) trusts
 * that certificate through Node's NODE_EXTRA_CA_CERTS and opens private targets
 * (`PIER_ALLOW_PRIVATE_TARGETS=1`), as an operator of a closed network would. The
 * in-process replica, with the guard's defaults, refuses the same document: loopback is
 * not a customer's to name.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import * as oauth from 'oauth4webapi';
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  request,
  startTestPlatform,
  testIdentityPrefix,
  type TestOrg,
  type TestPlatform,
} from '../helpers/platform.js';
import { freePort, healthy, startServe, type Served } from '../helpers/serve.js';
import { selfSignedCert } from '../helpers/self-signed.js';
import { modernClient } from '../mcp/helpers.js';
import { consoleKey, discover, exchange, requestIdOf, startLogin } from './helpers.js';

const REDIRECT = 'http://localhost:7779/callback';

let tp: TestPlatform;
let org: TestOrg;
let key: string;
let dir: string;
let docServer: https.Server;
let clientId: string;
let replica: Served;
let replicaUrl: string;
let fetches = 0;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'pier-cimd-'));
  // A throwaway certificate for 127.0.0.1, trusted only by the replica started below.
  const { certFile: cert, keyFile } = await selfSignedCert(dir, {
    cn: '127.0.0.1',
    days: 1,
    subjectAltName: 'IP:127.0.0.1',
  });
  docServer = https.createServer(
    { cert: await readFile(cert), key: await readFile(keyFile) },
    (req, res) => {
      fetches++;
      if (req.url !== '/mcp/client.json') return void res.writeHead(404).end();
      res.writeHead(200, { 'content-type': 'application/json' }).end(
        JSON.stringify({
          client_id: clientId,
          client_name: 'Documented Client',
          redirect_uris: [REDIRECT],
          grant_types: ['authorization_code', 'refresh_token'],
          response_types: ['code'],
          token_endpoint_auth_method: 'none',
        }),
      );
    },
  );
  await new Promise<void>((r) => docServer.listen(0, '127.0.0.1', r));
  clientId = `https://127.0.0.1:${(docServer.address() as AddressInfo).port}/mcp/client.json`;

  tp = await startTestPlatform();
  org = await tp.createOrg();
  key = await consoleKey(tp, org.id, 'doc@example.com');
  const port = await freePort();
  replicaUrl = `http://127.0.0.1:${port}`;
  replica = startServe(['--listen', `127.0.0.1:${port}`, '--data-dir', path.join(dir, 'replica')], {
    env: {
      PIER_DATABASE_URL: tp.db.url,
      PIER_ALLOW_PRIVATE_TARGETS: '1',
      NODE_EXTRA_CA_CERTS: cert,
      PIER_LOG_LEVEL: 'warn',
      PIER_DATABASE_USER_PREFIX: testIdentityPrefix(),
      PIER_SERVICES_HOST: '127.0.0.1',
      PIER_STORAGE_POOL: 'directory',
    },
  });
  await healthy(replicaUrl);
}, 90_000);

afterAll(async () => {
  replica?.child.kill('SIGTERM');
  await replica?.exited;
  await new Promise((r) => docServer?.close(r));
  await tp?.close();
  await rm(dir, { recursive: true, force: true });
});

it('refuses a document on a loopback address with the guard’s defaults', async () => {
  const res = await fetch(
    `${tp.url}/v1/oauth/authorize?${new URLSearchParams({ client_id: clientId, redirect_uri: REDIRECT })}`,
    { redirect: 'manual' },
  );
  expect(res.status).toBe(400);
  const body = (await res.json()) as { error: string };
  expect(body.error).toContain('could not be fetched');
  expect(body.error).toContain('loopback');
  expect(fetches).toBe(0);
});

it('logs a documented client in as verified, and its token works on every replica', async () => {
  const as = await discover(replicaUrl);
  const client: oauth.Client = { client_id: clientId, token_endpoint_auth_method: 'none' };
  const login = await startLogin(as, client, REDIRECT);
  const requestId = await requestIdOf(login.authorizeUrl);
  expect(fetches).toBe(1);

  const look = await request(replicaUrl, 'POST', '/v1/oauth/consent/lookup', {
    token: key,
    body: { requestId },
  });
  expect(look.status).toBe(200);
  expect(look.body.client).toMatchObject({
    id: clientId,
    name: 'Documented Client',
    verified: true,
    redirectHost: 'localhost:7779',
  });
  const decided = await request(replicaUrl, 'POST', '/v1/oauth/consent/decide', {
    token: key,
    body: { requestId, approve: true },
  });
  expect(decided.status).toBe(200);
  const tokens = await exchange(as, client, new URL(decided.body.redirectUrl), login, REDIRECT);

  // The grant and its token live in the shared database: the other replica serves them.
  const mcp = await modernClient(tp.url, tokens.access_token);
  try {
    const listed = await mcp.callTool({ name: 'apps_list', arguments: {} });
    expect(listed.isError).toBeFalsy();
  } finally {
    await mcp.close();
  }

  // A redirect URI the document does not list is refused before any redirect.
  const other = await startLogin(as, client, 'http://localhost:7779/elsewhere');
  const res = await fetch(other.authorizeUrl, { redirect: 'manual' });
  expect(res.status).toBe(400);
  // The document was kept: the second login did not fetch it again.
  expect(fetches).toBe(1);
});
