import { existsSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ArchiveRef, InstanceSpec } from '../engine.js';
import { EngineError } from '../engine.js';
import { listBases, startSegment } from './archive.js';
import { archivePaths, type ArchivePaths } from './archive-volume.js';
import { Templates } from './template.js';
import { makeTestEnv, rand, type TestEnv } from './test-env.test-helper.js';

/** The WAL segments (not history or backup files) in the archive, by name. */
async function segments(paths: ArchivePaths): Promise<string[]> {
  return (await readdir(paths.wal)).filter((f) => /^[0-9A-F]{24}$/.test(f)).sort();
}

/** Whether a segment comes before the one named `start` (its log and segment number). */
const precedes = (segment: string, start: string) => segment.slice(8) < start.slice(8);

describe('PostgresEngine: pruning the archive to the point-in-time window', () => {
  let t: TestEnv;
  let archive: ArchiveRef;
  let source: InstanceSpec;
  let paths: ArchivePaths;

  beforeAll(async () => {
    t = await makeTestEnv('prune');
    await new Templates().ensure(t.env);
    const id = `dbi-${rand()}`;
    archive = { id: `arc-${rand()}`, sourceVolume: id };
    source = await t.instance({ id, volume: id, archive });
    await t.engine.provision(t.env, source, {});
  });

  afterAll(async () => {
    await t?.cleanup();
  });

  it('is a no-op on a missing archive and before the oldest base', async () => {
    await t.engine.pruneArchive(t.env, { id: `arc-${rand()}` }, new Date());
    await t.engine.baseBackup(t.env, source);
    paths = archivePaths((await t.env.pool.info(archive.id))!.path);
    const [only] = await listBases(paths);
    const wal = await segments(paths);
    await t.engine.pruneArchive(t.env, archive, new Date(Date.parse(only!.consistentAt) - 1));
    expect((await listBases(paths)).map((b) => b.label)).toEqual([only!.label]);
    // (The archiver may ship one more segment meanwhile: none is removed.)
    expect(await segments(paths)).toEqual(expect.arrayContaining(wal));
  });

  it('drops older bases and the WAL before the kept base; restores after the point, not before', async () => {
    // Base 1 was taken above; then 'a', base 2, the prune point, 'b', a moment, 'c', base 3.
    await t.query(source, 'CREATE TABLE events (name text)');
    await t.query(source, `INSERT INTO events VALUES ('a')`);
    await t.engine.flushArchive(t.env, source);
    await sleep(30);
    const beforeBase2 = new Date();
    await sleep(30);
    await t.engine.baseBackup(t.env, source);
    await sleep(30);
    const prunePoint = new Date();
    await sleep(30);
    await t.query(source, `INSERT INTO events VALUES ('b')`);
    await sleep(30);
    const afterPrune = new Date();
    await sleep(30);
    await t.query(source, `INSERT INTO events VALUES ('c')`);
    await t.engine.baseBackup(t.env, source);
    await t.engine.flushArchive(t.env, source);

    const bases = await listBases(paths);
    expect(bases).toHaveLength(3);
    const [base1, base2, base3] = bases as [
      (typeof bases)[0],
      (typeof bases)[0],
      (typeof bases)[0],
    ];
    expect(new Date(base2.consistentAt) <= prunePoint).toBe(true);
    expect(new Date(base3.consistentAt) > prunePoint).toBe(true);
    const start2 = (await startSegment(paths, base2))!;
    expect(start2).toMatch(/^[0-9A-F]{24}$/);
    const walBefore = await segments(paths);
    expect(walBefore.some((s) => precedes(s, start2))).toBe(true);

    await t.engine.pruneArchive(t.env, archive, prunePoint);

    expect((await listBases(paths)).map((b) => b.label)).toEqual([base2.label, base3.label]);
    expect(existsSync(path.join(paths.base, base1.label))).toBe(false);
    expect(existsSync(path.join(paths.base, `${base1.label}.json`))).toBe(false);
    const walAfter = await segments(paths);
    expect(walAfter.filter((s) => precedes(s, start2))).toEqual([]);
    expect(walAfter).toEqual(expect.arrayContaining(walBefore.filter((s) => !precedes(s, start2))));
    const r = await t.engine.archiveRange(t.env, archive);
    expect(r.oldest?.toISOString()).toBe(new Date(base2.consistentAt).toISOString());

    // Again: nothing more goes.
    await t.engine.pruneArchive(t.env, archive, prunePoint);
    expect((await listBases(paths)).map((b) => b.label)).toEqual([base2.label, base3.label]);
    expect(await segments(paths)).toEqual(expect.arrayContaining(walAfter));

    // A moment after the prune point restores from base 2 and the WAL kept after it.
    const target = await t.instance();
    await t.engine.restore(t.env, archive, afterPrune, target);
    expect(await t.query(target, 'SELECT name FROM events ORDER BY name')).toEqual([
      { name: 'a' },
      { name: 'b' },
    ]);
    await t.engine.destroy(t.env, target);

    // One before base 2 is no longer reachable, and nothing is made for it.
    const refused = await t.instance();
    const err = await t.engine.restore(t.env, archive, beforeBase2, refused).catch((e) => e);
    expect(err).toBeInstanceOf(EngineError);
    expect(err.code).toBe('as-of-out-of-range');
    expect(await t.env.pool.info(refused.volume)).toBeUndefined();
  });
});
