/**
 * Pruning a persistent Redis's AOF history to the point-in-time window, with a real
 * server on a directory pool: generations split off by baseBackup, forks inside the kept
 * history hold the right data, older moments are refused, and what a crash leaves halfway
 * never makes a fork wrong.
 */
import { chmod, link, mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DirectoryPool } from '../../storage/pool/directory-pool.js';
import { EngineError, type EngineEnv, type InstanceSpec } from '../engine.js';
import { readManifest, renderManifest } from './aof.js';
import { makeEnv, spec, tlsClient } from './env.test-helper.js';
import { historyDir } from './generations.js';
import { RedisEngine } from './index.js';
import { redisPaths, type RedisPaths } from './paths.js';

const engine = new RedisEngine();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Waits until the wall clock is 30 ms past the start of the next second. */
async function nextSecond(): Promise<void> {
  await sleep(1030 - (Date.now() % 1000));
}

describe('RedisEngine: pruning the AOF to the point-in-time window', () => {
  let dir: string;
  let env: EngineEnv;
  let source: InstanceSpec;
  let paths: RedisPaths;
  let c: Redis;
  const made: InstanceSpec[] = [];
  const clients: Redis[] = [];

  /** The keys of a fork of the source as of `asOf`, destroyed afterwards. */
  async function forkKeys(asOf: Date): Promise<string[]> {
    const fork = await spec();
    made.push(fork);
    await engine.restore(env, source.archive!, asOf, fork);
    const fc = await tlsClient(env, fork);
    clients.push(fc);
    const keys = (await fc.keys('*')).sort();
    fc.disconnect();
    await engine.destroy(env, fork);
    return keys;
  }

  const generations = async () => (await readdir(historyDir(paths)).catch(() => [])).sort();

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'pier-redis-prune-'));
    await chmod(dir, 0o711); // the service user passes through to its volumes
    env = await makeEnv(await DirectoryPool.open({ dir: path.join(dir, 'pool') }), dir);
    source = await spec();
    made.push(source);
    await engine.provision(env, source, {});
    paths = redisPaths((await env.pool.info(source.volume))!.path);
    c = await tlsClient(env, source);
    clients.push(c);
  }, 60_000);

  afterAll(async () => {
    for (const cl of clients) cl.disconnect();
    for (const inst of made) await engine.destroy(env, inst).catch(() => undefined);
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('splits generations, forks inside them, prunes what only older moments need', async () => {
    // A rotation with nothing written since the base adds no generation.
    await engine.baseBackup(env, source);
    expect(await generations()).toEqual([]);

    await c.set('a', '1');
    await nextSecond();
    const atA = new Date();
    await nextSecond();
    await engine.baseBackup(env, source); // generation 1: the first base and 'a'
    await c.set('b', '2');
    await nextSecond();
    const atB = new Date();
    await nextSecond();
    await engine.baseBackup(env, source); // generation 2: a base with 'a', and 'b'
    await c.set('c', '3');
    await nextSecond();
    const atC = new Date();
    await engine.flushArchive(env, source);

    const [gen1, gen2] = await generations();
    expect(gen2).toBeDefined();
    // The live AOF was rewritten: a new base, and the incremental files of before are gone.
    const live = (await readManifest(paths.aofDir))!;
    const gen1Files = (await readManifest(path.join(historyDir(paths), gen1!)))!.map((e) => e.file);
    for (const f of gen1Files) expect(live.map((e) => e.file)).not.toContain(f);
    const range = await engine.archiveRange(env, source.archive!);
    expect(range.oldest!.getTime()).toBeLessThanOrEqual(atA.getTime());

    // Forks read the generation holding the moment.
    expect(await forkKeys(atA)).toEqual(['a']);
    expect(await forkKeys(atB)).toEqual(['a', 'b']);
    expect(await forkKeys(atC)).toEqual(['a', 'b', 'c']);

    // A window starting at atB keeps generation 2 (its base is before atB) and the live AOF.
    await engine.pruneArchive(env, source.archive!, atB);
    expect(await generations()).toEqual([gen2]);
    const after = await engine.archiveRange(env, source.archive!);
    expect(after.oldest!.getTime()).toBeGreaterThan(atA.getTime());
    expect(after.oldest!.getTime()).toBeLessThanOrEqual(atB.getTime());
    // Again: nothing more goes.
    await engine.pruneArchive(env, source.archive!, atB);
    expect(await generations()).toEqual([gen2]);

    expect(await forkKeys(atB)).toEqual(['a', 'b']);
    expect(await forkKeys(atC)).toEqual(['a', 'b', 'c']);
    const refused = await spec();
    made.push(refused);
    const err = await engine.restore(env, source.archive!, atA, refused).catch((e) => e);
    expect(err).toBeInstanceOf(EngineError);
    expect(err.code).toBe('as-of-out-of-range');
    expect(await env.pool.info(refused.volume)).toBeUndefined();

    // A window starting after the live base keeps only the live AOF, which still forks.
    await engine.pruneArchive(env, source.archive!, new Date());
    expect(await generations()).toEqual([]);
    expect(await forkKeys(new Date())).toEqual(['a', 'b', 'c']);
  }, 120_000);

  it('keeps every fork right across what a crash leaves halfway', async () => {
    await c.set('d', '4');
    await nextSecond();
    await engine.flushArchive(env, source);
    const hist = historyDir(paths);
    await mkdir(hist, { recursive: true, mode: 0o700 });
    // A rotation that committed its generation and died before the rewrite: a prefix of
    // the live AOF (same files), ignored by forks and replaced by the next rotation.
    const live = (await readManifest(paths.aofDir))!.filter((e) => e.type !== 'h');
    const stale = path.join(hist, '20200101T000000000Z');
    await mkdir(stale, { mode: 0o700 });
    for (const e of live) await link(path.join(paths.aofDir, e.file), path.join(stale, e.file));
    await writeFile(path.join(stale, 'appendonly.aof.manifest'), renderManifest(live));
    // One that died before its commit, and a prune that died after removing a manifest.
    await mkdir(path.join(hist, '20200101T000000001Z.partial'));
    await mkdir(path.join(hist, '20200101T000000002Z'));

    const oldest = (await engine.archiveRange(env, source.archive!)).oldest!;
    expect(await forkKeys(new Date())).toEqual(['a', 'b', 'c', 'd']);
    await engine.baseBackup(env, source);
    const gens = await generations();
    expect(gens).toHaveLength(1);
    expect(gens[0]).not.toBe('20200101T000000000Z');
    expect((await engine.archiveRange(env, source.archive!)).oldest).toEqual(oldest);
    await c.set('e', '5');
    await nextSecond();
    expect(await forkKeys(new Date())).toEqual(['a', 'b', 'c', 'd', 'e']);
  }, 120_000);
});
