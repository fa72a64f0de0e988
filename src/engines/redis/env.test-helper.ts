/**
 * What the Redis engine tests share: an EngineEnv on a given pool with a real CA, free
 * loopback ports, instance specs, and real clients (TLS as `app`, or the admin socket).
 */
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { Redis } from 'ioredis';
import { ensureCa } from '../../crypto/ca.js';
import type { StoragePool } from '../../storage/pool/pool.js';
import { resolveServiceUser } from '../../host/service-user.js';
import type { EngineEnv, InstanceSpec } from '../engine.js';
import { redisPaths } from './paths.js';

/** An engine env on `pool`, with a CA made in `dir`. */
export async function makeEnv(pool: StoragePool, dir: string): Promise<EngineEnv> {
  const ca = await ensureCa(path.join(dir, 'ca'), ['localhost', '127.0.0.1']);
  return {
    pool,
    user: await resolveServiceUser('pier'),
    stateDir: path.join(dir, 'state'),
    tls: { certFile: ca.certFile, keyFile: ca.keyFile, caFile: ca.caFile },
    log: { info: () => {}, warn: () => {} },
  };
}

/** A loopback port nobody listens on right now. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** A fresh instance spec; persistent (with an archive) unless `persistent` is false. */
export async function spec(persistent = true, memoryMb = 64): Promise<InstanceSpec> {
  const id = `dbi-${randomBytes(5).toString('hex')}`;
  const volume = `redis-${id}`;
  return {
    id,
    volume,
    internalPort: await freePort(),
    memoryMb,
    sizeGb: 1,
    password: randomBytes(12).toString('base64url'),
    ...(persistent ? { archive: { id: `arc-${id}`, sourceVolume: volume } } : {}),
  };
}

/** A TLS client verifying the platform CA; `auth` false connects without credentials. */
export async function tlsClient(
  env: EngineEnv,
  inst: InstanceSpec,
  auth: { username?: string; password?: string } | false = {
    username: 'app',
    password: inst.password,
  },
): Promise<Redis> {
  const ca = await readFile(env.tls.caFile, 'utf8');
  const client = new Redis({
    host: '127.0.0.1',
    port: inst.internalPort,
    tls: { ca, servername: 'localhost' },
    // Authenticated clients say HELLO 3 AUTH (ioredis's default), like most customers'
    // libraries; an anonymous one speaks RESP2, since HELLO without AUTH is refused.
    ...(auth ? auth : { protocol: 2 as const, disableClientInfo: true }),
    lazyConnect: true,
    enableReadyCheck: false,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  client.on('error', () => {}); // failures reach the test through the commands
  await client.connect();
  return client;
}

/** A client on the instance's control socket as the platform's admin user. */
export async function adminClient(env: EngineEnv, inst: InstanceSpec): Promise<Redis> {
  const info = await env.pool.info(inst.volume);
  if (!info) throw new Error(`no volume ${inst.volume}`);
  const paths = redisPaths(info.path);
  const client = new Redis({
    path: paths.socket,
    username: 'pier',
    password: (await readFile(paths.adminPassFile, 'utf8')).trim(),
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  client.on('error', () => {});
  await client.connect();
  return client;
}

/** Milliseconds since `start` (from process.hrtime.bigint()). */
export const msSince = (start: bigint) => Number(process.hrtime.bigint() - start) / 1e6;
