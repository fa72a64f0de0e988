/**
 * `POST /v1/resources/:name/sql`: one statement on a real PostgreSQL database, as its
 * role `app` through its front. Read-only runs, agent rules (production data, app
 * limits), another organization's database, key kinds, body validation, timeout and
 * truncation.
 */
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SQL_LIMITS } from '../../src/services/databases/sql.js';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';
import { SQL_READER_ROLE } from '../../src/engines/postgres/settings.js';
import { layoutOf } from '../../src/engines/postgres/layout.js';
import { withClient } from '../../src/engines/postgres/sql.js';
import { instancesOf } from '../../src/services/databases/records.js';
import { createDatabase, pgClient, platformCa, storagePool, waitFor } from './helpers.js';

let tp: TestPlatform;
let org: TestOrg;
let other: TestOrg;
let dbUrl: string;

const sql = (name: string, body: unknown, token = org.token) =>
  tp.request('POST', `/v1/resources/${name}/sql`, { token, body });

async function token(body: Record<string, unknown>): Promise<{ id: string; token: string }> {
  const res = await tp.request('POST', '/v1/tokens', {
    token: org.token,
    body: { name: 'sql test', ...body },
  });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body;
}

beforeAll(async () => {
  tp = await startTestPlatform();
  org = await tp.createOrg();
  other = await tp.createOrg();
  dbUrl = (await createDatabase(tp, org, { name: 'sql-db', kind: 'postgres', memoryMb: 256 })).url;
  await createDatabase(tp, other, { name: 'sql-theirs', kind: 'postgres', memoryMb: 256 });
  for (const name of ['sql-web', 'sql-api']) {
    expect(
      (await tp.request('POST', '/v1/apps', { token: org.token, body: { name } })).status,
    ).toBe(201);
  }
  const attached = await tp.request('POST', '/v1/apps/sql-web/attach', {
    token: org.token,
    body: { database: 'sql-db' },
  });
  expect(attached.status, JSON.stringify(attached.body)).toBeLessThan(300);
  const made = await sql('sql-db', {
    sql: 'CREATE TABLE items (id int PRIMARY KEY, label text, at timestamptz DEFAULT now())',
  });
  expect(made.status, JSON.stringify(made.body)).toBe(200);
}, 180_000);
afterAll(async () => tp?.close());

describe('running SQL', () => {
  it('runs a write and a query with parameters, values as text with their types', async () => {
    const ins = await sql('sql-db', {
      sql: 'INSERT INTO items (id, label) VALUES ($1, $2), ($3, $4) RETURNING id',
      params: [1, 'one', 2, null],
    });
    expect(ins.status, JSON.stringify(ins.body)).toBe(200);
    expect(ins.body).toMatchObject({
      command: 'INSERT',
      rowCount: 2,
      rows: [['1'], ['2']],
      truncated: false,
      readOnly: false,
    });
    const sel = await sql('sql-db', {
      sql: 'SELECT id, label, $1::bigint * 2 AS twice FROM items ORDER BY id',
      params: ['9007199254740993'],
    });
    expect(sel.status).toBe(200);
    expect(sel.body).toEqual({
      command: 'SELECT',
      columns: [
        { name: 'id', type: 'integer' },
        { name: 'label', type: 'text' },
        { name: 'twice', type: 'bigint' },
      ],
      rows: [
        ['1', 'one', '18014398509481986'],
        ['2', null, '18014398509481986'],
      ],
      rowCount: 2,
      truncated: false,
      readOnly: false,
    });
  });

  it('runs one statement only: a chain is a syntax error, not two statements', async () => {
    const res = await sql('sql-db', { sql: "SELECT 1; INSERT INTO items VALUES (99, 'x')" });
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ code: 'sql-error', sqlstate: '42601' });
    const n = await sql('sql-db', { sql: 'SELECT count(*) FROM items WHERE id = 99' });
    expect(n.body.rows).toEqual([['0']]);
  });

  it('answers a SQL error with the message, SQLSTATE and position', async () => {
    const res = await sql('sql-db', { sql: 'SELECT nope FROM items' });
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({
      code: 'sql-error',
      sqlstate: '42703',
      position: 8,
      error: 'column "nope" does not exist',
    });
  });

  it('refuses a write in a read-only run, and commits nothing', async () => {
    const res = await sql('sql-db', {
      sql: "INSERT INTO items (id, label) VALUES (3, 'three')",
      readOnly: true,
    });
    expect(res.status).toBe(409);
    expect(res.body).toMatchObject({ code: 'read-only-transaction', sqlstate: '25006' });
    // A write inside a query, and lifting read-only from inside the statement, fail too.
    const cte = await sql('sql-db', {
      sql: 'WITH d AS (DELETE FROM items RETURNING id) SELECT * FROM d',
      readOnly: true,
    });
    expect(cte.body).toMatchObject({ code: 'read-only-transaction' });
    const lift = await sql('sql-db', {
      sql: "SELECT set_config('transaction_read_only', 'off', true), set_config('default_transaction_read_only', 'off', false)",
      readOnly: true,
    });
    expect(lift.status).toBe(422);
    const read = await sql('sql-db', { sql: 'SELECT count(*) FROM items', readOnly: true });
    expect(read.body).toMatchObject({ rows: [['2']], readOnly: true });
  });

  it('stops a statement past its timeout', async () => {
    const started = Date.now();
    const res = await sql('sql-db', { sql: 'SELECT pg_sleep(5)', timeoutMs: 200 });
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ code: 'sql-timeout', sqlstate: '57014' });
    expect(Date.now() - started).toBeLessThan(4000);
  });

  it('truncates past maxRows and past the byte cap, with the full rowCount', async () => {
    const rows = await sql('sql-db', {
      sql: 'SELECT g FROM generate_series(1, 50) g',
      maxRows: 10,
    });
    expect(rows.body).toMatchObject({ rowCount: 50, truncated: true });
    expect(rows.body.rows).toHaveLength(10);
    const cap = SQL_LIMITS.maxResultBytes;
    SQL_LIMITS.maxResultBytes = 10_000;
    try {
      const big = await sql('sql-db', {
        sql: "SELECT repeat('x', 1000) FROM generate_series(1, 100)",
      });
      expect(big.body).toMatchObject({ rowCount: 100, truncated: true });
      expect(big.body.rows.length).toBeGreaterThan(5);
      expect(big.body.rows.length).toBeLessThan(10);
    } finally {
      SQL_LIMITS.maxResultBytes = cap;
    }
  });

  it('reports every problem of a bad body at once', async () => {
    const res = await sql('sql-db', {
      sql: '',
      params: [{}],
      readOnly: 'yes',
      timeoutMs: 0,
      maxRows: 10_001,
      extra: 1,
    });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('bad-request');
    const paths = (res.body.issues as { path: string }[]).map((i) => i.path);
    for (const p of ['sql', 'params.0', 'readOnly', 'timeoutMs', 'maxRows']) {
      expect(paths).toContain(p);
    }
    const long = await sql('sql-db', { sql: 'x'.repeat(100_001) });
    expect(long.status).toBe(400);
  });

  it('answers a redis database with sql-postgres-only', async () => {
    await createDatabase(tp, org, { name: 'sql-cache', kind: 'redis', memoryMb: 128 });
    const res = await sql('sql-cache', { sql: 'SELECT 1' });
    expect(res.status).toBe(409);
    expect(res.body.code).toBe('sql-postgres-only');
  });
});

describe('a sleeping database', () => {
  it('wakes through its front for a statement, as for any client', async () => {
    await createDatabase(tp, org, {
      name: 'sql-sleepy',
      kind: 'postgres',
      memoryMb: 256,
      suspendPolicy: { mode: 'stop', idleSeconds: 10 },
    });
    const power = async () =>
      (await tp.request('GET', '/v1/resources/sql-sleepy', { token: org.token })).body.power;
    await waitFor(async () => (await power()) === 'stopped', 'sql-sleepy to stop', 30_000);
    const res = await sql('sql-sleepy', { sql: 'SELECT 40 + 2 AS answer' });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.rows).toEqual([['42']]);
    expect(await power()).toBe('running');
  }, 60_000);
});

describe('who may run SQL', () => {
  it('answers another organization’s database exactly like a missing one', async () => {
    const theirs = await sql('sql-theirs', { sql: 'SELECT 1' });
    const missing = await sql('never-made', { sql: 'SELECT 1' });
    expect(theirs.status).toBe(404);
    expect(missing.status).toBe(404);
    expect(theirs.body.error).toBe(missing.body.error.replace('never-made', 'sql-theirs'));
  });

  it('refuses a read-only key and a revoked one', async () => {
    const reader = await token({ scopes: ['read'] });
    expect((await sql('sql-db', { sql: 'SELECT 1' }, reader.token)).body.code).toBe('token-scope');
    const gone = await token({});
    expect((await sql('sql-db', { sql: 'SELECT 1' }, gone.token)).status).toBe(200);
    await tp.request('DELETE', `/v1/tokens/${gone.id}`, { token: org.token });
    const after = await sql('sql-db', { sql: 'SELECT 1' }, gone.token);
    expect(after.status).toBe(401);
  });

  it('needs prodDataRead for a production token, and then runs read-only', async () => {
    const blind = await token({ agent: { class: 'production' } });
    const refused = await sql('sql-db', { sql: 'SELECT 1' }, blind.token);
    expect(refused.status).toBe(403);
    expect(refused.body.code).toBe('agent-token-production-data');
    const reader = await token({ agent: { class: 'production', prodDataRead: true } });
    const read = await sql('sql-db', { sql: 'SELECT count(*) FROM items' }, reader.token);
    expect(read.status).toBe(200);
    expect(read.body).toMatchObject({ rows: [['2']], readOnly: true });
    // readOnly: false in the body does not lift it.
    const write = await sql('sql-db', { sql: 'DELETE FROM items', readOnly: false }, reader.token);
    expect(write.status).toBe(409);
    expect(write.body.code).toBe('read-only-transaction');
  });

  it('runs read-only SQL as a role that may read and nothing else: the app’s sessions survive', async () => {
    const app = pgClient(dbUrl, await platformCa(tp));
    app.on('error', () => undefined);
    await app.connect();
    try {
      const { pid } = (await app.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!;
      const prod = await token({ agent: { class: 'production', prodDataRead: true } });
      for (const [who, body, t] of [
        ['a full key asking readOnly', { readOnly: true }, org.token],
        ['a production agent', {}, prod.token],
      ] as const) {
        const kill = await sql(
          'sql-db',
          { sql: 'SELECT pg_terminate_backend($1)', params: [pid], ...body },
          t,
        );
        expect([kill.status, kill.body.code, kill.body.sqlstate], who).toEqual([
          422,
          'sql-error',
          '42501',
        ]);
        // The app's session is alive.
        expect((await app.query('SELECT 1 AS one')).rows, who).toEqual([{ one: 1 }]);
        const me = await sql(
          'sql-db',
          {
            sql: "SELECT current_user, pg_has_role('pg_signal_backend', 'member'), pg_has_role('app', 'member'), (SELECT count(*) FROM items)",
            ...body,
          },
          t,
        );
        expect(me.body.rows, who).toEqual([[SQL_READER_ROLE, 'f', 'f', expect.any(String)]]);
        for (const write of ['INSERT INTO items (id) VALUES (99)', 'CREATE TABLE nope (x int)']) {
          const res = await sql('sql-db', { sql: write, ...body }, t);
          expect([res.status, res.body.code], `${who}: ${write}`).toEqual([
            409,
            'read-only-transaction',
          ]);
        }
        // Becoming the owner from inside the statement is refused too.
        const become = await sql(
          'sql-db',
          { sql: "SELECT set_config('role', 'app', false)", ...body },
          t,
        );
        expect([become.status, become.body.sqlstate], who).toEqual([422, '42501']);
      }
      // A run that may write stays the owner's, as before.
      const owner = await sql('sql-db', { sql: 'SELECT current_user' });
      expect(owner.body.rows).toEqual([['app']]);
    } finally {
      await app.end();
    }
  });

  it('makes the reader role on a database made before it, at its first read-only run', async () => {
    // As a database of an older pier: no reader role, and no pg_hba line for it.
    const { ctx } = tp.platform;
    const row = await ctx.db
      .selectFrom('databases')
      .selectAll()
      .where('name', '=', 'sql-db')
      .executeTakeFirstOrThrow();
    const primary = (await instancesOf(ctx.db, row.id)).find((i) => i.role === 'primary')!;
    const layout = layoutOf((await (await storagePool(tp)).info(primary.volume))!.path);
    const hba = path.join(layout.pgdata, 'pg_hba.conf');
    const text = await readFile(hba, 'utf8');
    await writeFile(
      hba,
      text
        .split('\n')
        .filter((l) => !l.includes(SQL_READER_ROLE))
        .join('\n'),
    );
    await withClient(layout, primary.internal_port, async (c) => {
      await c.query('SELECT pg_reload_conf()');
      await c.query(`DROP ROLE ${SQL_READER_ROLE}`);
    });
    const read = await sql('sql-db', { sql: 'SELECT current_user', readOnly: true });
    expect(read.status, JSON.stringify(read.body)).toBe(200);
    expect(read.body.rows).toEqual([[SQL_READER_ROLE]]);
    expect(await readFile(hba, 'utf8')).toContain(SQL_READER_ROLE);
  });

  it('lets a sandbox token write', async () => {
    const sandbox = await token({ agent: { class: 'sandbox' } });
    const res = await sql(
      'sql-db',
      { sql: "UPDATE items SET label = 'two' WHERE id = 2" },
      sandbox.token,
    );
    expect(res.body).toMatchObject({ command: 'UPDATE', rowCount: 1, readOnly: false });
  });

  it('keeps an app-limited token to the databases of its apps, and audits both', async () => {
    const web = await token({ agent: { class: 'sandbox', apps: ['sql-web'] } });
    expect((await sql('sql-db', { sql: 'SELECT 1' }, web.token)).status).toBe(200);
    const api = await token({ agent: { class: 'sandbox', apps: ['sql-api'] } });
    const refused = await sql('sql-db', { sql: 'SELECT 1' }, api.token);
    expect(refused.status).toBe(403);
    expect(refused.body.code).toBe('agent-token-app-scope');
    const audit = await tp.request('GET', '/v1/agent-actions', { token: org.token });
    const rows = (audit.body as { tokenId?: string; route: string; verdict: string }[]).filter(
      (r) => r.route === '/v1/resources/:name/sql',
    );
    expect(rows.map((r) => r.verdict)).toEqual(expect.arrayContaining(['allowed', 'refused']));
  });
});
