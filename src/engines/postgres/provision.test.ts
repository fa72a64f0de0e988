import { existsSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EngineError } from '../engine.js';
import { PostgresEngine } from './index.js';
import { layoutOf } from './layout.js';
import { isAlive } from './postmaster.js';
import { Templates } from './template.js';
import { makeTestEnv, processesMentioning, type TestEnv } from './test-env.test-helper.js';

const ms = (since: number) => Date.now() - since;

async function engineError(p: Promise<unknown>): Promise<EngineError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(EngineError);
  return err as EngineError;
}

describe('PostgresEngine: provision, start, stop, destroy', () => {
  let t: TestEnv;

  beforeAll(async () => {
    t = await makeTestEnv('provision');
    // The default template, once for the file (what a host has after its first database).
    const started = Date.now();
    await new Templates().ensure(t.env);
    console.log(`template built in ${ms(started)} ms`);
  });

  afterAll(async () => {
    await t?.cleanup();
  });

  it('provisions a database the customer reaches over TLS with its password only', async () => {
    const inst = await t.instance({ memoryMb: 1024 });
    const started = Date.now();
    await t.engine.provision(t.env, inst, {});
    const client = await t.connect(inst);
    const { rows } = await client.query(
      `SELECT current_user AS u, current_database() AS d, ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()`,
    );
    const elapsed = ms(started);
    // Speed is the databases-create benchmark's to judge, not a timed test's (a busy host).
    console.log(`provision to first query over TLS: ${elapsed} ms`);
    expect(rows[0]).toEqual({ u: 'app', d: 'app', ssl: true });

    // memoryMb shapes the server: a quarter of it as shared buffers.
    expect((await client.query('SHOW shared_buffers')).rows[0].shared_buffers).toBe('256MB');
    expect((await client.query('SHOW effective_cache_size')).rows[0].effective_cache_size).toBe(
      '768MB',
    );
    // The customer owns its database and schema and can create databases, never a superuser.
    await client.query('CREATE TABLE t (x int)');
    const role = await client.query(
      `SELECT rolsuper, rolcreatedb FROM pg_roles WHERE rolname = 'app'`,
    );
    expect(role.rows[0]).toEqual({ rolsuper: false, rolcreatedb: true });
    const owner = await client.query(
      `SELECT pg_get_userbyid(nspowner) AS o FROM pg_namespace WHERE nspname = 'public'`,
    );
    expect(owner.rows[0].o).toBe('app');
    await client.end();

    // No TLS: refused. Wrong password: refused.
    await expect(t.connect(inst, { ssl: false })).rejects.toThrow(/no encryption|reject/);
    await expect(t.connect(inst, { password: 'wrong' })).rejects.toThrow(
      /password authentication failed/,
    );
    // Not as the superuser either, even with TLS.
    await expect(t.connect(inst, { user: 'pier' })).rejects.toThrow();
    await t.engine.destroy(t.env, inst);
  });

  it('starts and stops idempotently, and pid names the live postmaster', async () => {
    const inst = await t.instance();
    await t.engine.provision(t.env, inst, {});
    const pid = await t.engine.pid(t.env, inst);
    expect(pid).toBeGreaterThan(0);
    await t.engine.start(t.env, inst);
    expect(await t.engine.pid(t.env, inst)).toBe(pid);

    await t.engine.stop(t.env, inst);
    expect(await t.engine.pid(t.env, inst)).toBeUndefined();
    expect(await isAlive(pid!)).toBe(false);
    await t.engine.stop(t.env, inst);
    await t.engine.stop(t.env, inst, 'immediate');

    let started = Date.now();
    await t.engine.start(t.env, inst);
    console.log(`start after a clean stop: ${ms(started)} ms`);
    const again = await t.engine.pid(t.env, inst);
    expect(again).toBeGreaterThan(0);
    await t.engine.start(t.env, inst);
    expect(await t.engine.pid(t.env, inst)).toBe(again);
    expect(await t.query(inst, 'SELECT 1 AS one')).toEqual([{ one: 1 }]);

    // Killed outright, it comes back through crash recovery.
    process.kill(again!, 'SIGKILL');
    started = Date.now();
    await t.engine.start(t.env, inst);
    console.log(`start after SIGKILL (crash recovery): ${ms(started)} ms`);
    expect(await t.query(inst, 'SELECT 1 AS one')).toEqual([{ one: 1 }]);
    await t.engine.destroy(t.env, inst);
  });

  it('finishes a provision that a crash interrupted', async () => {
    // Crash after the snapshot, before any configuration or start.
    const inst = await t.instance();
    const template = await new Templates().ensure(t.env);
    const volume = await t.env.pool.snapshot(template, inst.volume);
    await rm(path.join(volume.path, 'pgdata', 'pier.conf'));
    await t.engine.provision(t.env, inst, {});
    expect(await t.query(inst, 'SELECT 2 AS two')).toEqual([{ two: 2 }]);

    // Crash after the start, with the server killed: the rerun recovers it and sets the password.
    const pid = (await t.engine.pid(t.env, inst))!;
    process.kill(pid, 'SIGKILL');
    // A crash is over once the server is gone: a rerun that raced its death would talk to
    // a dying server (ECONNRESET) rather than recover a dead one.
    for (let i = 0; i < 200 && (await isAlive(pid)); i++)
      await new Promise((r) => setTimeout(r, 25));
    const changed = { ...inst, password: 'another-password' };
    await t.engine.provision(t.env, changed, {});
    expect(await t.query(changed, 'SELECT 3 AS three')).toEqual([{ three: 3 }]);
    await t.engine.destroy(t.env, inst);
  });

  it('destroy leaves no process, no volume and no socket', async () => {
    const inst = await t.instance();
    await t.engine.provision(t.env, inst, {});
    const pid = await t.engine.pid(t.env, inst);
    const layout = layoutOf((await t.env.pool.info(inst.volume))!.path);
    expect(existsSync(path.join(layout.socketDir, `.s.PGSQL.${inst.internalPort}`))).toBe(true);

    await t.engine.destroy(t.env, inst);
    expect(await isAlive(pid!)).toBe(false);
    expect(await processesMentioning(layout.root)).toEqual([]);
    expect(await t.env.pool.info(inst.volume)).toBeUndefined();
    expect(existsSync(layout.socketDir)).toBe(false);
    await t.engine.destroy(t.env, inst); // again: nothing to do
  });

  it('applies an ICU locale, building its template once for concurrent creates', async () => {
    const a = await t.instance();
    const b = await t.instance();
    const built = () => t.logged.filter((m) => m === 'postgres template built').length;
    const before = built();
    // Two spellings of one locale share one template.
    await Promise.all([
      t.engine.provision(t.env, a, { locale: 'de-DE' }),
      t.engine.provision(t.env, b, { locale: 'de_de' }),
    ]);
    expect(built() - before).toBe(1);
    const [db] = await t.query(
      a,
      `SELECT datlocprovider AS p, daticulocale AS l FROM pg_database WHERE datname = 'app'`,
    );
    expect(db).toEqual({ p: 'i', l: 'de-DE' });
    // German collation puts ä beside a; C.UTF-8 sorts it after z.
    const [order] = await t.query(b, `SELECT 'ä' < 'b' AS before`);
    expect(order!.before).toBe(true);

    const plain = await t.instance();
    await t.engine.provision(t.env, plain, {});
    expect((await t.query(plain, `SELECT 'ä' < 'b' AS before`))[0]!.before).toBe(false);
    await Promise.all([a, b, plain].map((i) => t.engine.destroy(t.env, i)));
    // A template build (initdb) and three provisions: ~20 s alone on a busy 2-core host.
  }, 120_000);

  it('refuses a locale ICU does not know, or that is not a locale name', async () => {
    const inst = await t.instance();
    const unknown = await engineError(t.engine.provision(t.env, inst, { locale: 'xx-YY' }));
    expect(unknown.code).toBe('unsupported');
    expect(unknown.message).toMatch(/not known to ICU/);
    for (const bad of ['de DE', '../etc', 'de;DROP', '', '-de']) {
      const err = await engineError(t.engine.provision(t.env, inst, { locale: bad }));
      expect(err.code).toBe('unsupported');
    }
    // With no list of ICU locales remembered yet, the build itself finds out and cleans up.
    const fresh = { ...t.env, stateDir: path.join(t.dir, 'fresh-state') };
    const late = await engineError(new PostgresEngine().provision(fresh, inst, { locale: 'qq' }));
    expect(late.code).toBe('unsupported');
    expect(await t.env.pool.info(inst.volume)).toBeUndefined();
    expect((await t.env.pool.list()).filter((v) => v.endsWith('-build'))).toEqual([]);
  });
});
