/**
 * `POST /v1/resources/:name/sql`: one statement on a real PostgreSQL database, as its
 * role `app` through its front. Read-only runs, agent rules (production data, app
 * limits), another organization's database, key kinds, body validation, timeout and
 * truncation.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SQL_LIMITS } from '../../src/services/databases/sql.js';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';
import { createDatabase, waitFor } from './helpers.js';

let tp: TestPlatform;
let org: TestOrg;
let other: TestOrg;

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
  await createDatabase(tp, org, { name: 'sql-db', kind: 'postgres', memoryMb: 256 });
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
