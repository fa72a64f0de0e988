import { existsSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ArchiveRef, InstanceSpec } from '../engine.js';
import { EngineError } from '../engine.js';
import { Templates } from './template.js';
import { makeTestEnv, rand, type TestEnv } from './test-env.test-helper.js';

describe('PostgresEngine: archive and point-in-time restore', () => {
  let t: TestEnv;
  let archive: ArchiveRef;
  let source: InstanceSpec;
  /** A moment strictly between the commits of 'first' and 'second'. */
  let between: Date;

  beforeAll(async () => {
    t = await makeTestEnv('archive');
    await new Templates().ensure(t.env);
    const id = `dbi-${rand()}`;
    archive = { id: `arc-${rand()}`, sourceVolume: id };
    source = await t.instance({ id, volume: id, archive });
    await t.engine.provision(t.env, source, {});
  });

  afterAll(async () => {
    await t?.cleanup();
  });

  it('has no range before its first base backup, and refuses to restore then', async () => {
    const r = await t.engine.archiveRange(t.env, archive);
    expect(r.oldest).toBeUndefined();
    const target = await t.instance();
    const err = await t.engine.restore(t.env, archive, new Date(), target).catch((e) => e);
    expect(err).toBeInstanceOf(EngineError);
    expect(err.code).toBe('as-of-out-of-range');
  });

  it('restores exactly what was committed up to a moment between two commits', async () => {
    const started = Date.now();
    await t.engine.baseBackup(t.env, source);
    console.log(`base backup: ${Date.now() - started} ms`);
    const { oldest } = await t.engine.archiveRange(t.env, archive);
    expect(oldest).toBeInstanceOf(Date);

    await t.query(source, 'CREATE TABLE events (name text)');
    await t.query(source, `INSERT INTO events VALUES ('first')`);
    await sleep(30);
    between = new Date();
    await sleep(30);
    await t.query(source, `INSERT INTO events VALUES ('second')`);
    await t.engine.flushArchive(t.env, source);

    const target = await t.instance({ archive: { id: `arc-${rand()}` } });
    const restoring = Date.now();
    await t.engine.restore(t.env, archive, between, target);
    console.log(`restore (copy, replay, promote, password): ${Date.now() - restoring} ms`);
    expect(await t.query(target, 'SELECT name FROM events')).toEqual([{ name: 'first' }]);

    // It is a server of its own: it writes, the source does not see it, and it archives
    // into its own archive, not the source's.
    await t.query(target, `INSERT INTO events VALUES ('restored')`);
    expect((await t.query(source, 'SELECT count(*)::int AS n FROM events'))[0]!.n).toBe(2);
    await t.engine.flushArchive(t.env, target);
    const own = (await t.env.pool.info(target.archive!.id))!.path;
    expect((await readdir(path.join(own, 'wal'))).length).toBeGreaterThan(0);
    expect(existsSync(path.join(own, 'wal', '00000002.history'))).toBe(true);

    // A rerun finds the work done and changes nothing.
    await t.engine.restore(t.env, archive, between, target);
    expect((await t.query(target, 'SELECT count(*)::int AS n FROM events'))[0]!.n).toBe(2);
    await t.engine.destroy(t.env, target);
    await t.engine.destroyArchive(t.env, target.archive!);
  });

  it('restores the newest moment after a flush, with both commits', async () => {
    const now = new Date();
    const target = await t.instance();
    await t.engine.restore(t.env, archive, now, target);
    const rows = await t.query(target, 'SELECT name FROM events ORDER BY name');
    expect(rows).toEqual([{ name: 'first' }, { name: 'second' }]);
    await t.engine.destroy(t.env, target);
  });

  it('refuses moments outside the range, naming the range', async () => {
    const { oldest } = await t.engine.archiveRange(t.env, archive);
    const target = await t.instance();
    for (const asOf of [new Date(oldest!.getTime() - 60_000), new Date(Date.now() + 60_000)]) {
      const err = await t.engine.restore(t.env, archive, asOf, target).catch((e) => e);
      expect(err).toBeInstanceOf(EngineError);
      expect(err.code).toBe('as-of-out-of-range');
      expect(err.message).toContain(oldest!.toISOString().slice(0, 10));
    }
    expect(await t.env.pool.info(target.volume)).toBeUndefined();
  });

  it('still restores once the source is gone, up to its last shipped moment', async () => {
    await t.engine.flushArchive(t.env, source);
    await t.engine.destroy(t.env, source);
    const r = await t.engine.archiveRange(t.env, archive);
    expect(r.newest.getTime()).toBeLessThanOrEqual(Date.now());
    expect(r.newest.getTime()).toBeGreaterThan(between.getTime());

    // No commit follows the moment in the archive: the whole archive is replayed.
    const target = await t.instance();
    await t.engine.restore(t.env, archive, r.newest, target);
    expect(t.logged).toContain('archive ends before a later commit: replaying all');
    expect((await t.query(target, 'SELECT count(*)::int AS n FROM events'))[0]!.n).toBe(2);
    await t.engine.destroy(t.env, target);

    await t.engine.destroyArchive(t.env, archive);
    expect(await t.env.pool.info(archive.id)).toBeUndefined();
    await t.engine.destroyArchive(t.env, archive);
  });
});
