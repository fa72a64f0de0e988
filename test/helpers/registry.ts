/**
 * A real OCI registry for tests: Debian's `docker-registry` (distribution 2.8, installed by
 * scripts/setup.sh) on a free loopback port with a temp storage dir, stopped (and its
 * storage removed) by `stop()`.
 *
 *   const registry = await startRegistry();
 *   await pushImage(registry.url, 'app:1', { layers: [busyboxLayer()] });
 *   await store.pull(`${registry.host}/app:1`);
 *   await registry.stop();
 *
 * `startTokenRegistry()` runs the same registry with `auth: token`: a small token service
 * started here issues ES256 JWTs signed by a throwaway certificate that the registry
 * trusts (its `rootcertbundle`), optionally only to users with a password.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createPrivateKey, randomBytes, sign, X509Certificate } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { selfSignedCert } from './self-signed.js';

const REGISTRY_BIN = '/usr/bin/docker-registry';

/** A running registry. */
export interface TestRegistry {
  /** `http://127.0.0.1:<port>` */
  url: string;
  /** `127.0.0.1:<port>`: the registry part of image references. */
  host: string;
  /** Where the registry keeps its data (tests may tamper with it). */
  storageDir: string;
  /** The file the registry serves a blob from (filesystem driver layout). */
  blobFile(digest: string): string;
  stop(): Promise<void>;
}

/** A registry with token auth, and the token service it trusts. */
export interface TokenRegistry extends TestRegistry {
  /** The token endpoint the registry names as its realm. */
  realm: string;
  /** How many token requests the service has answered (granted or not). */
  tokenRequests(): number;
  /** A `Bearer …` Authorization value granting `actions` on `repository` (for pushing). */
  authorization(repository: string, actions?: string[]): string;
}

/** A port nobody listens on right now (closed again before it is returned). */
export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

async function waitUntilUp(url: string, child: ChildProcess, log: () => string): Promise<void> {
  const deadline = Date.now() + 15_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null)
      throw new Error(`docker-registry exited (${child.exitCode}): ${log()}`);
    try {
      const res = await fetch(`${url}/v2/`);
      await res.body?.cancel();
      if (res.status === 200 || res.status === 401) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`docker-registry did not answer at ${url}: ${log()}`);
}

async function launch(dir: string, auth: string): Promise<TestRegistry> {
  const port = await freePort();
  const storageDir = path.join(dir, 'data');
  const config = [
    'version: 0.1',
    'log:',
    '  level: error',
    '  accesslog:',
    '    disabled: true',
    'storage:',
    '  filesystem:',
    `    rootdirectory: ${storageDir}`,
    '  delete:',
    '    enabled: true',
    'http:',
    `  addr: 127.0.0.1:${port}`,
    `  secret: ${randomBytes(16).toString('hex')}`,
    auth,
  ].join('\n');
  const configFile = path.join(dir, 'config.yml');
  await writeFile(configFile, `${config}\n`);
  const child = spawn(REGISTRY_BIN, ['serve', configFile], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (c: Buffer) => (stderr = (stderr + c.toString()).slice(-4000)));
  const url = `http://127.0.0.1:${port}`;
  try {
    await waitUntilUp(url, child, () => stderr);
  } catch (err) {
    child.kill('SIGKILL');
    throw err;
  }
  return {
    url,
    host: `127.0.0.1:${port}`,
    storageDir,
    blobFile: (digest) => {
      const hex = digest.replace(/^sha256:/, '');
      return path.join(storageDir, 'docker/registry/v2/blobs/sha256', hex.slice(0, 2), hex, 'data');
    },
    async stop() {
      if (child.exitCode === null) {
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGTERM');
        await Promise.race([exited, new Promise((r) => setTimeout(r, 5000))]);
        if (child.exitCode === null) child.kill('SIGKILL');
      }
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** Starts a registry without auth on a free loopback port. */
export async function startRegistry(): Promise<TestRegistry> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'pier-registry-'));
  return launch(dir, '');
}

const b64url = (b: Buffer | string) => Buffer.from(b).toString('base64url');

/**
 * Starts a registry with token auth. With `users`, the token service answers only
 * requests with basic credentials of one of them; without, it grants anyone.
 */
export async function startTokenRegistry(
  opts: { users?: Record<string, string> } = {},
): Promise<TokenRegistry> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'pier-registry-'));
  const { certFile, keyFile } = await selfSignedCert(dir, {
    cn: 'pier-test-token-issuer',
    days: 2,
    name: 'token',
  });
  const key = createPrivateKey(await readFile(keyFile));
  const certDer = new X509Certificate(await readFile(certFile)).raw;
  const service = 'pier-test-registry';
  const issuer = 'pier-test-issuer';

  const issue = (access: { type: string; name: string; actions: string[] }[], subject: string) => {
    const now = Math.floor(Date.now() / 1000);
    const header = { alg: 'ES256', typ: 'JWT', x5c: [certDer.toString('base64')] };
    const claims = {
      iss: issuer,
      sub: subject,
      aud: service,
      iat: now,
      nbf: now - 10,
      exp: now + 300,
      jti: randomBytes(8).toString('hex'),
      access,
    };
    const signed = `${b64url(JSON.stringify(header))}.${b64url(JSON.stringify(claims))}`;
    const sig = sign('sha256', Buffer.from(signed), { key, dsaEncoding: 'ieee-p1363' });
    return `${signed}.${b64url(sig)}`;
  };

  let requests = 0;
  const tokens = http.createServer((req, res) => {
    requests++;
    const url = new URL(req.url ?? '/', 'http://token');
    let subject = 'anonymous';
    if (opts.users) {
      const m = /^Basic (.+)$/.exec(req.headers.authorization ?? '');
      const [user, pass] = m ? Buffer.from(m[1]!, 'base64').toString().split(/:(.*)/s) : [];
      if (!user || opts.users[user] === undefined || opts.users[user] !== pass) {
        res
          .writeHead(401, { 'content-type': 'application/json' })
          .end('{"details":"bad credentials"}');
        return;
      }
      subject = user;
    }
    const access = url.searchParams.getAll('scope').flatMap((scope) => {
      const [type, name, actions] = scope.split(':');
      return type && name && actions ? [{ type, name, actions: actions.split(',') }] : [];
    });
    const token = issue(access, subject);
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        token,
        access_token: token,
        expires_in: 300,
        issued_at: new Date().toISOString(),
      }),
    );
  });
  await new Promise<void>((resolve) => tokens.listen(0, '127.0.0.1', resolve));
  const realm = `http://127.0.0.1:${(tokens.address() as net.AddressInfo).port}/token`;

  const auth = [
    'auth:',
    '  token:',
    `    realm: ${realm}`,
    `    service: ${service}`,
    `    issuer: ${issuer}`,
    `    rootcertbundle: ${certFile}`,
  ].join('\n');
  let registry: TestRegistry;
  try {
    registry = await launch(dir, auth);
  } catch (err) {
    tokens.closeAllConnections();
    tokens.close();
    throw err;
  }
  return {
    ...registry,
    realm,
    tokenRequests: () => requests,
    authorization: (repository, actions = ['pull', 'push']) =>
      `Bearer ${issue([{ type: 'repository', name: repository, actions }], 'pusher')}`,
    async stop() {
      tokens.closeAllConnections();
      await new Promise<void>((resolve) => tokens.close(() => resolve()));
      await registry.stop();
    },
  };
}
