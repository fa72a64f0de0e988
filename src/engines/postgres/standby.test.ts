import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { layoutOf } from './layout.js';
import { processesIn } from './postmaster.js';
import { Templates } from './template.js';
import { makeTestEnv, processesMentioning, rand, type TestEnv } from './test-env.test-helper.js';

describe('PostgresEngine: synchronous standby', () => {
  let t: TestEnv;

  beforeAll(async () => {
    t = await makeTestEnv('standby');
    await new Templates().ensure(t.env);
  });

  afterAll(async () => {
    await t?.cleanup();
  });

  it('loses no committed row when the primary is killed and the standby promoted', async () => {
    const archive = { id: `arc-${rand()}` };
    const primary = await t.instance({ archive });
    await t.engine.provision(t.env, primary, {});
    const standby = await t.instance({ archive, password: 'promoted-password' });
    let started = Date.now();
    await t.engine.createStandby(t.env, primary, standby);
    console.log(`standby created and synchronous: ${Date.now() - started} ms`);
    // A rerun finds it made, streaming and synchronous.
    await t.engine.createStandby(t.env, primary, standby);

    const client = await t.connect(primary);
    expect((await client.query('SHOW synchronous_standby_names')).rows[0]).toEqual({
      synchronous_standby_names: `"${standby.id}"`,
    });
    await client.query('CREATE TABLE ledger (n int)');
    for (let n = 1; n <= 50; n++) await client.query('INSERT INTO ledger VALUES ($1)', [n]);
    await client.end();

    // The primary dies without any chance to ship more.
    const primaryPid = (await t.engine.pid(t.env, primary))!;
    process.kill(primaryPid, 'SIGKILL');

    started = Date.now();
    await t.engine.promote(t.env, standby);
    console.log(`promote: ${Date.now() - started} ms`);
    const rows = await t.query(standby, 'SELECT count(*)::int AS n, sum(n)::int AS s FROM ledger');
    expect(rows[0]).toEqual({ n: 50, s: 1275 });

    // The new primary waits for no standby: commits go through at once.
    const promoted = await t.connect(standby);
    expect((await promoted.query('SHOW synchronous_standby_names')).rows[0]).toEqual({
      synchronous_standby_names: '',
    });
    await promoted.query('INSERT INTO ledger VALUES (51)');
    await promoted.end();
    await t.engine.promote(t.env, standby); // idempotent

    // Destroying both leaves nothing running (the killed primary's backends included).
    const primaryRoot = layoutOf((await t.env.pool.info(primary.volume))!.path);
    await t.engine.destroy(t.env, primary);
    await t.engine.destroy(t.env, standby);
    expect(await processesIn(primaryRoot.pgdata)).toEqual([]);
    expect(await processesMentioning(primary.volume)).toEqual([]);
    expect(await processesMentioning(standby.volume)).toEqual([]);
    await t.engine.destroyArchive(t.env, archive);
    expect(await t.env.pool.list()).toEqual([expect.stringMatching(/^pgtpl\d+-libc$/)]);
  });

  it('stops waiting for a lost standby when detached, releasing waiting commits', async () => {
    const primary = await t.instance();
    await t.engine.provision(t.env, primary, {});
    const standby = await t.instance();
    await t.engine.createStandby(t.env, primary, standby);
    await t.query(primary, 'CREATE TABLE t (n int)');

    // The standby is gone: a commit waits for it...
    await t.engine.destroy(t.env, standby);
    const client = await t.connect(primary);
    let done = false;
    const pending = client.query('INSERT INTO t VALUES (1)').then(() => (done = true));
    await sleep(300);
    expect(done).toBe(false);

    // ...until the primary is told to stop waiting.
    await t.engine.detachStandby(t.env, primary);
    await pending;
    await client.query('INSERT INTO t VALUES (2)');
    await client.end();
    expect((await t.query(primary, 'SELECT count(*)::int AS n FROM t'))[0]!.n).toBe(2);
    await t.engine.detachStandby(t.env, primary); // idempotent
    // After a restart it still waits for nobody.
    await t.engine.stop(t.env, primary);
    await t.engine.start(t.env, primary);
    expect((await t.query(primary, 'SHOW synchronous_standby_names'))[0]).toEqual({
      synchronous_standby_names: '',
    });
    await t.engine.destroy(t.env, primary);
  });
});
