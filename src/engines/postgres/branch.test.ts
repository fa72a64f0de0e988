import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BtrfsPool } from '../../storage/pool/btrfs-pool.js';
import { btrfsSkipReason, forceCleanup } from '../../storage/pool/btrfs-env.test-helper.js';
import { Templates } from './template.js';
import { makeTestEnv, rand, type TestEnv } from './test-env.test-helper.js';

const skipBtrfs = btrfsSkipReason();
if (skipBtrfs) console.warn(`skipping the postgres branch test on btrfs: ${skipBtrfs}`);

/**
 * The branch contract on one pool: a copy of the running source as it is now, independent
 * afterwards in both directions, with its own port, password and archive.
 */
function branchTests(label: string, open: () => Promise<TestEnv>, skip = false) {
  describe.skipIf(skip)(`PostgresEngine: branch on ${label}`, () => {
    let t: TestEnv;

    beforeAll(async () => {
      t = await open();
      await new Templates().ensure(t.env);
    });

    afterAll(async () => {
      await t?.cleanup();
    });

    it('copies a running source as it is now; writes on either side stay there', async () => {
      const source = await t.instance({ archive: { id: `arc-${rand()}` } });
      await t.engine.provision(t.env, source, {});
      await t.query(source, 'CREATE TABLE notes (body text)');
      await t.query(source, `INSERT INTO notes VALUES ('before')`);
      // An open, uncommitted transaction at the moment of the copy must not show up in it.
      const open = await t.connect(source);
      await open.query('BEGIN');
      await open.query(`INSERT INTO notes VALUES ('uncommitted')`);

      const target = await t.instance({ archive: { id: `arc-${rand()}` } });
      const started = Date.now();
      await t.engine.branch(t.env, source, target);
      console.log(`branch of a running source on ${label}: ${Date.now() - started} ms`);
      await open.query('COMMIT');
      await open.end();

      await t.query(source, `INSERT INTO notes VALUES ('source after')`);
      await t.query(target, `INSERT INTO notes VALUES ('branch after')`);
      const notes = async (i: typeof source) =>
        (await t.query(i, 'SELECT body FROM notes ORDER BY body')).map((r) => r.body);
      expect(await notes(target)).toEqual(['before', 'branch after']);
      expect(await notes(source)).toEqual(['before', 'source after', 'uncommitted']);

      // Its own password (the source's is refused) and its own archive.
      await expect(t.connect(target, { password: source.password })).rejects.toThrow(
        /password authentication failed/,
      );
      await t.engine.flushArchive(t.env, target);
      expect(await t.env.pool.info(target.archive!.id)).toBeDefined();

      // A rerun finds the branch made and running.
      const pid = await t.engine.pid(t.env, target);
      await t.engine.branch(t.env, source, target);
      expect(await t.engine.pid(t.env, target)).toBe(pid);
      expect(await notes(target)).toEqual(['before', 'branch after']);

      // A branch of the stopped source is a plain copy.
      await t.engine.stop(t.env, source);
      const cold = await t.instance();
      await t.engine.branch(t.env, source, cold);
      expect(await notes(cold)).toEqual(['before', 'source after', 'uncommitted']);
      expect(await t.engine.pid(t.env, source)).toBeUndefined();

      for (const i of [source, target, cold]) await t.engine.destroy(t.env, i);
    });
  });
}

branchTests('a directory pool', () => makeTestEnv('branch'));

branchTests(
  'btrfs',
  () =>
    makeTestEnv('branch-btrfs', {
      pool: (dir) => BtrfsPool.open({ dir, imageSizeBytes: 2 * 1024 ** 3 }),
    }).then((t) => ({
      ...t,
      cleanup: async () => {
        await t.cleanup();
        await forceCleanup(t.dir, [path.join(t.dir, 'pool', 'pool.img')]);
      },
    })),
  skipBtrfs !== undefined,
);
