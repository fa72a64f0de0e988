import { chmod, mkdtemp, readdir, rm, stat, symlink } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BtrfsPool } from '../../storage/pool/btrfs-pool.js';
import {
  btrfsSkipReason,
  forceCleanup,
  tempPoolDir,
} from '../../storage/pool/btrfs-env.test-helper.js';
import { DirectoryPool } from '../../storage/pool/directory-pool.js';
import { EngineError, type EngineEnv, type InstanceSpec } from '../engine.js';
import { adminClient, makeEnv, msSince, spec, tlsClient } from './env.test-helper.js';
import { RedisEngine } from './index.js';
import { redisPaths } from './paths.js';
import { isAlive } from './process.js';

const engine = new RedisEngine();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Waits until the wall clock is `ms` past the start of a second. */
async function pastSecondBoundary(ms = 30): Promise<void> {
  const into = Date.now() % 1000;
  await sleep((into < ms ? ms : 1000 + ms) - into);
}

async function engineError(p: Promise<unknown>): Promise<EngineError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(EngineError);
  return err as EngineError;
}

describe('RedisEngine on a directory pool', () => {
  let dir: string;
  let env: EngineEnv;
  const clients: Redis[] = [];
  const made: InstanceSpec[] = [];

  async function provisioned(persistent = true): Promise<InstanceSpec> {
    const inst = await spec(persistent);
    made.push(inst);
    await engine.provision(env, inst, {});
    return inst;
  }
  async function client(inst: InstanceSpec): Promise<Redis> {
    const c = await tlsClient(env, inst);
    clients.push(c);
    return c;
  }

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'pier-redis-'));
    await chmod(dir, 0o711); // the service user passes through to its volumes
    env = await makeEnv(await DirectoryPool.open({ dir: path.join(dir, 'pool') }), dir);
  });

  afterAll(async () => {
    for (const c of clients) c.disconnect();
    for (const inst of made) await engine.destroy(env, inst).catch(() => undefined);
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('provisions a server that answers SET/GET over TLS as app', async () => {
    const inst = await spec();
    made.push(inst);
    const start = process.hrtime.bigint();
    await engine.provision(env, inst, {});
    const c = await tlsClient(env, inst);
    clients.push(c);
    expect(await c.set('greeting', 'hello')).toBe('OK');
    expect(await c.get('greeting')).toBe('hello');
    console.log(`redis provision → first command over TLS: ${msSince(start).toFixed(0)} ms`);
    // Provision again (a rerun after a crash) finds it done.
    const pid = await engine.pid(env, inst);
    await engine.provision(env, inst, {});
    expect(await engine.pid(env, inst)).toBe(pid);
    expect(await c.get('greeting')).toBe('hello');
  });

  it('refuses no password, a wrong password and the default user', async () => {
    const inst = await provisioned(false);
    const anon = await tlsClient(env, inst, false);
    clients.push(anon);
    await expect(anon.get('k')).rejects.toThrow(/NOAUTH/);
    await expect(anon.call('AUTH', 'app', 'wrong')).rejects.toThrow(/WRONGPASS/);
    await expect(anon.call('AUTH', inst.password)).rejects.toThrow(/WRONGPASS/);
    await expect(anon.call('AUTH', 'default', inst.password)).rejects.toThrow(/WRONGPASS/);
    await expect(anon.call('AUTH', 'default', '')).rejects.toThrow(/WRONGPASS/);
    // A client that authenticates in its handshake (HELLO 3 AUTH) is dropped.
    await expect(tlsClient(env, inst, { username: 'app', password: 'nope' })).rejects.toThrow();
  });

  it('refuses admin commands to app, and allows its data commands', async () => {
    const inst = await provisioned(false);
    const c = await client(inst);
    for (const cmd of [
      ['CONFIG', 'GET', 'maxmemory'],
      ['SHUTDOWN', 'NOSAVE'],
      ['DEBUG', 'SLEEP', '0'],
      ['MODULE', 'LIST'],
      ['ACL', 'SETUSER', 'app', 'on', '+@all'],
      ['BGREWRITEAOF'],
      ['REPLICAOF', '127.0.0.1', '1'],
      ['MIGRATE', '127.0.0.1', '1', 'k', '0', '1'],
    ]) {
      // DEBUG and MODULE are also disabled outright (enable-*-command no).
      await expect(c.call(cmd[0]!, ...cmd.slice(1)), cmd.join(' ')).rejects.toThrow(
        /NOPERM|command not allowed/,
      );
    }
    expect(await c.call('ACL', 'WHOAMI')).toBe('app');
    await c.set('k', 'v');
    expect(await c.keys('*')).toEqual(['k']);
    expect(await c.flushdb()).toBe('OK');
    expect(await engine.pid(env, inst)).toBeDefined();
  });

  it('sets maxmemory, runs as the service user and keeps its secrets private', async () => {
    const inst = await provisioned();
    const admin = await adminClient(env, inst);
    clients.push(admin);
    expect(await admin.config('GET', 'maxmemory')).toEqual([
      'maxmemory',
      String(inst.memoryMb * 1024 * 1024),
    ]);
    expect(await admin.config('GET', 'maxmemory-policy')).toEqual([
      'maxmemory-policy',
      'noeviction',
    ]);
    expect(await admin.config('GET', 'aof-timestamp-enabled')).toEqual([
      'aof-timestamp-enabled',
      'yes',
    ]);
    const pid = (await engine.pid(env, inst))!;
    expect((await stat(`/proc/${pid}`)).uid).toBe(env.user.uid);
    const p = redisPaths((await env.pool.info(inst.volume))!.path);
    // The server reads its key and config but cannot change them, nor read the admin
    // password; it owns only its data and socket directories.
    const mode = async (f: string) => {
      const st = await stat(f);
      return { mode: st.mode & 0o777, uid: st.uid, gid: st.gid };
    };
    const { uid, gid } = env.user;
    // Run as another user than root, pier and its servers are one user.
    const root = process.getuid?.() === 0 ? 0 : uid;
    const rootGid = process.getuid?.() === 0 ? 0 : gid;
    expect(await mode(p.root)).toEqual({ mode: 0o711, uid: root, gid: rootGid });
    expect(await mode(p.keyFile)).toEqual({ mode: 0o640, uid: root, gid });
    expect(await mode(p.conf)).toEqual({ mode: 0o640, uid: root, gid });
    expect(await mode(p.adminPassFile)).toEqual({ mode: 0o600, uid: root, gid: rootGid });
    expect(await mode(p.dataDir)).toEqual({ mode: 0o700, uid, gid });
    expect(await mode(p.socketDir)).toEqual({ mode: 0o700, uid, gid });
    expect(Buffer.byteLength(p.socket)).toBeLessThan(108);
  });

  it('keeps persistent data across stop and start; both are idempotent', async () => {
    const inst = await provisioned();
    const c = await client(inst);
    await c.set('kept', 'yes');
    const pid = (await engine.pid(env, inst))!;
    await engine.stop(env, inst);
    await engine.stop(env, inst);
    expect(await engine.pid(env, inst)).toBeUndefined();
    expect(await isAlive(pid)).toBe(false);
    await engine.start(env, inst);
    const again = await engine.pid(env, inst);
    await engine.start(env, inst);
    expect(await engine.pid(env, inst)).toBe(again);
    const c2 = await client(inst);
    expect(await c2.get('kept')).toBe('yes');
  });

  it('keeps a non-persistent instance across a planned stop, not an immediate one', async () => {
    const inst = await provisioned(false);
    const p = redisPaths((await env.pool.info(inst.volume))!.path);
    expect(await readdir(p.dataDir)).toEqual([]); // no AOF
    await (await client(inst)).set('k', '1');
    await engine.stop(env, inst, 'fast');
    await engine.start(env, inst);
    const c = await client(inst);
    expect(await c.get('k')).toBe('1');
    await c.set('k', '2');
    await engine.stop(env, inst, 'immediate');
    await engine.start(env, inst);
    expect(await (await client(inst)).get('k')).toBe('1');
  });

  it('branches a running persistent instance into an independent one', async () => {
    const source = await provisioned();
    const s = await client(source);
    await s.set('shared', 'before');
    const target = await spec();
    made.push(target);
    const start = process.hrtime.bigint();
    await engine.branch(env, source, target);
    console.log(`redis branch (directory pool, AOF copy): ${msSince(start).toFixed(0)} ms`);
    const t = await client(target);
    expect(await t.get('shared')).toBe('before');
    await t.set('only-target', '1');
    await s.set('only-source', '1');
    expect(await s.get('only-target')).toBeNull();
    expect(await t.get('only-source')).toBeNull();
    // A rerun finds it done and keeps its data.
    await engine.branch(env, source, target);
    expect(await t.get('only-target')).toBe('1');
    // The target is persistent on its own: its data survives its restart.
    await engine.stop(env, target);
    await engine.start(env, target);
    expect(await (await client(target)).get('only-target')).toBe('1');
  });

  it('branches a non-persistent instance (BGSAVE) into persistent and back', async () => {
    const source = await provisioned(false);
    await (await client(source)).set('k', 'v');
    const persistent = await spec(true);
    made.push(persistent);
    await engine.branch(env, source, persistent);
    expect(await (await client(persistent)).get('k')).toBe('v');
    const range = await engine.archiveRange(env, persistent.archive!);
    expect(range.oldest).toBeDefined();
    const ephemeral = await spec(false);
    made.push(ephemeral);
    await engine.branch(env, persistent, ephemeral); // AOF → RDB for a server without AOF
    expect(await (await client(ephemeral)).get('k')).toBe('v');
  });

  it('forks to a moment between two writes and holds exactly the first', async () => {
    const source = await provisioned();
    const s = await client(source);
    await pastSecondBoundary();
    await s.set('first', '1');
    const asOf = new Date();
    // The rule: a fork holds its moment's whole second, so this later write is in it...
    await s.set('same-second', 'y');
    await pastSecondBoundary(); // ...and nothing of the next second is.
    await s.set('second', '2');
    await engine.flushArchive(env, source);
    const range = await engine.archiveRange(env, source.archive!);
    expect(range.oldest!.getTime()).toBeLessThanOrEqual(asOf.getTime());
    expect(range.newest.getTime()).toBeGreaterThanOrEqual(asOf.getTime());
    const fork = await spec();
    made.push(fork);
    const start = process.hrtime.bigint();
    await engine.restore(env, source.archive!, asOf, fork);
    console.log(`redis fork with asOf (directory pool): ${msSince(start).toFixed(0)} ms`);
    const f = await client(fork);
    expect(await f.get('first')).toBe('1');
    expect(await f.get('same-second')).toBe('y');
    expect(await f.get('second')).toBeNull();
    // The fork goes on with a history of its own.
    await f.set('third', '3');
    expect(await s.get('third')).toBeNull();
    // A fork "as of now" holds the latest write.
    await s.set('latest', 'x');
    await engine.flushArchive(env, source);
    const now = await spec(false);
    made.push(now);
    await engine.restore(env, source.archive!, new Date(), now);
    const n = await client(now);
    expect(await n.get('latest')).toBe('x');
    expect(await n.get('second')).toBe('2');
  });

  it('refuses a moment out of range and a fork of a non-persistent instance', async () => {
    const source = await provisioned();
    const fork = await spec();
    made.push(fork);
    const early = await engineError(
      engine.restore(env, source.archive!, new Date(Date.now() - 3_600_000), fork),
    );
    expect(early.code).toBe('as-of-out-of-range');
    const future = await engineError(
      engine.restore(env, source.archive!, new Date(Date.now() + 60_000), fork),
    );
    expect(future.code).toBe('as-of-out-of-range');
    const plain = await provisioned(false);
    const unsupported = await engineError(
      engine.restore(env, { id: 'arc-x', sourceVolume: plain.volume }, new Date(), fork),
    );
    expect(unsupported.code).toBe('unsupported');
    expect(unsupported.message).toMatch(/persistent redis/);
    expect(await env.pool.info(fork.volume)).toBeUndefined();
  });

  it('reports a server that cannot start with the end of its log', async () => {
    const inst = await spec(false);
    made.push(inst);
    const taken = net.createServer();
    await new Promise<void>((r) => taken.listen(inst.internalPort, '127.0.0.1', r));
    try {
      const err = await engineError(engine.provision(env, inst, {}));
      expect(err.code).toBe('failed');
      expect(err.message).toMatch(/Address already in use|Could not create server TCP/);
    } finally {
      taken.close();
    }
  });

  it('takes a server back after a crash: stale pidfile, data of the AOF', async () => {
    const inst = await provisioned();
    await (await client(inst)).set('before-crash', '1');
    const pid = (await engine.pid(env, inst))!;
    process.kill(pid, 'SIGKILL');
    for (let i = 0; i < 200 && (await engine.pid(env, inst)) !== undefined; i++) await sleep(10);
    expect(await engine.pid(env, inst)).toBeUndefined();
    await engine.start(env, inst);
    expect(await engine.pid(env, inst)).not.toBe(pid);
    expect(await (await client(inst)).get('before-crash')).toBe('1');
  });

  it('redoes a branch that was interrupted, and copies a stopped source at rest', async () => {
    const source = await provisioned();
    await (await client(source)).set('k', 'v');
    await engine.stop(env, source);
    // A server could have left a link to a file of root's in its data: it is not copied.
    const src = redisPaths((await env.pool.info(source.volume))!.path);
    await symlink('/etc/shadow', path.join(src.dataDir, 'dump.rdb'));
    const target = await spec();
    made.push(target);
    await env.pool.create(target.volume); // a half-made copy, without its marker
    await engine.branch(env, source, target);
    expect(await (await client(target)).get('k')).toBe('v');
    const dst = redisPaths((await env.pool.info(target.volume))!.path);
    expect(await readdir(dst.dataDir)).toEqual(['appendonlydir']);
    expect(await engine.pid(env, source)).toBeUndefined();
  });

  it('keeps the socket of a deep volume under /tmp and removes it on destroy', async () => {
    const deepEnv = {
      ...env,
      pool: await DirectoryPool.open({ dir: path.join(dir, 'd'.repeat(90)) }),
    };
    const inst = await spec(false);
    await engine.provision(deepEnv, inst, {});
    const p = redisPaths((await deepEnv.pool.info(inst.volume))!.path);
    expect(p.socketRoot).toBeDefined();
    const c = await tlsClient(deepEnv, inst);
    expect(await c.ping()).toBe('PONG');
    c.disconnect();
    await engine.destroy(deepEnv, inst);
    await expect(stat(p.socketRoot!)).rejects.toThrow(/ENOENT/);
  });

  it('destroys without leaving a process, a volume or a socket', async () => {
    const inst = await provisioned();
    const pid = (await engine.pid(env, inst))!;
    const p = redisPaths((await env.pool.info(inst.volume))!.path);
    await engine.destroy(env, inst);
    await engine.destroy(env, inst);
    expect(await isAlive(pid)).toBe(false);
    expect(await env.pool.info(inst.volume)).toBeUndefined();
    await expect(stat(p.socket)).rejects.toThrow(/ENOENT/);
    expect(await engine.pid(env, inst)).toBeUndefined();
    await engine.destroyArchive(env, inst.archive!);
  });
});

const skip = btrfsSkipReason();
if (skip) console.warn(`skipping the redis btrfs branch test: ${skip}`);

describe.skipIf(skip !== undefined)('RedisEngine on a btrfs pool', () => {
  let dir: string;
  let env: EngineEnv;
  let pool: BtrfsPool;
  const clients: Redis[] = [];

  beforeAll(async () => {
    dir = await tempPoolDir('redis');
    await chmod(dir, 0o711);
    pool = await BtrfsPool.open({ dir, imageSizeBytes: 2 * 1024 ** 3 });
    env = await makeEnv(pool, dir);
  });

  afterAll(async () => {
    for (const c of clients) c.disconnect();
    for (const name of (await pool?.list().catch(() => [])) ?? []) {
      await engine.destroy(env, { ...(await spec()), volume: name }).catch(() => undefined);
    }
    await pool?.close().catch(() => undefined);
    if (dir) await forceCleanup(dir, [path.join(dir, 'pool.img')]);
  });

  it('branches a running persistent instance with a snapshot', async () => {
    const source = await spec();
    await engine.provision(env, source, {});
    const s = await tlsClient(env, source);
    clients.push(s);
    for (let i = 0; i < 100; i++) await s.set(`k${i}`, String(i));
    const target = await spec();
    const start = process.hrtime.bigint();
    await engine.branch(env, source, target);
    console.log(`redis branch (btrfs snapshot): ${msSince(start).toFixed(0)} ms`);
    const t = await tlsClient(env, target);
    clients.push(t);
    expect(await t.dbsize()).toBe(100);
    await t.set('only-target', '1');
    await s.set('only-source', '1');
    expect(await s.get('only-target')).toBeNull();
    expect(await t.get('only-source')).toBeNull();
    expect((await pool.info(target.volume))?.quotaBytes).toBe(1024 ** 3);
    await engine.destroy(env, target);
    expect(await s.get('k99')).toBe('99');
    // A fork copies the AOF across subvolumes (a reflink on btrfs).
    await engine.flushArchive(env, source);
    const fork = await spec();
    await engine.restore(env, source.archive!, new Date(), fork);
    const f = await tlsClient(env, fork);
    clients.push(f);
    expect(await f.get('only-source')).toBe('1');
    expect(await f.dbsize()).toBe(101);
  });
});
