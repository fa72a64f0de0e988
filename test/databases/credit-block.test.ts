/**
 * A blocked organization's databases (docs/billing.md "Blocking at zero"; spec 4.3: a
 * database is a machine too): at zero they are stopped with their data kept, a client's
 * connection to the front does not wake them, the tunnel (a GET), SQL (read-only too)
 * and a copy's URL answer 402 `credit-blocked`, and nothing is charged for running.
 * After a grant the first connection wakes the database with its data. Another
 * organization and a read-only key get no further than before.
 */
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { meterStorage } from '../../src/services/billing/meter-storage.js';
import { actOnProjectedBalances } from '../../src/services/billing/projected.js';
import { recordUsage } from '../../src/services/billing/record.js';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';
import {
  createDatabase,
  localDatabases,
  openDatabaseTunnel,
  platformCa,
  query,
  sleep,
  waitFor,
} from './helpers.js';

let tp: TestPlatform;
let org: TestOrg;
let other: TestOrg;
let reader: string;
let ca: string;
let url: string;
let databaseId: string;

const req = (method: string, p: string, body?: unknown, token = org.token) =>
  tp.request(method, p, { token, body });
const power = async () => (await req('GET', '/v1/resources/ledger')).body.power as string;

beforeAll(async () => {
  tp = await startTestPlatform();
  const prices = { prices: { machine_running_seconds: 1_000_000 } };
  expect((await tp.admin('PUT', '/admin/v1/prices', prices)).status).toBe(200);
  org = await tp.createOrg({ grantCents: 1 });
  other = await tp.createOrg({ grantCents: 100 });
  ca = await platformCa(tp);
  const made = await createDatabase(tp, org, {
    name: 'ledger',
    kind: 'postgres',
    suspendPolicy: { mode: 'off' },
  });
  url = made.url;
  await query(url, ca, 'CREATE TABLE t AS SELECT 42 AS answer');
  databaseId = (
    await tp.platform.ctx.db
      .selectFrom('databases')
      .select('id')
      .where('name', '=', 'ledger')
      .executeTakeFirstOrThrow()
  ).id;
  reader = (await req('POST', '/v1/tokens', { name: 'reader', scopes: ['read'] })).body.token;
}, 120_000);
afterAll(async () => tp?.close());

describe('a blocked organization’s database', () => {
  it('is stopped with its data kept when the credit reaches zero', async () => {
    expect(await power()).toBe('running');
    // Two cents of running used on one: the projected balance is below zero.
    await recordUsage(tp.platform.ctx.db, [
      { orgId: org.id, kind: 'machine_running_seconds', quantity: 2 },
    ]);
    expect((await actOnProjectedBalances(tp.platform.ctx)).blocked).toEqual([org.id]);
    await waitFor(async () => (await power()) === 'stopped', 'the database to stop', 30_000);
    expect(localDatabases(tp).get(databaseId)?.power).toBe('stopped');
    expect((await req('GET', '/v1/resources/ledger')).status).toBe(200);
  }, 60_000);

  it('is not woken by a connection to its front', async () => {
    await expect(query(url, ca, 'SELECT answer FROM t')).rejects.toThrow();
    await sleep(500);
    expect(localDatabases(tp).get(databaseId)?.power).toBe('stopped');
    expect(await power()).toBe('stopped');
  }, 30_000);

  it('answers 402 credit-blocked to the tunnel, SQL and URL routes', async () => {
    const plain = await req('GET', '/v1/resources/ledger/tunnel');
    expect([plain.status, plain.body.code]).toEqual([402, 'credit-blocked']);
    const ws = await openDatabaseTunnel(tp, 'ledger', org.token);
    expect(ws.ws).toBeUndefined();
    expect([ws.status, ws.body.code]).toEqual([402, 'credit-blocked']);
    for (const body of [
      { sql: 'SELECT answer FROM t', readOnly: true },
      { sql: 'INSERT INTO t VALUES (1)' },
    ]) {
      const res = await req('POST', '/v1/resources/ledger/sql', body);
      expect([res.status, res.body.code], JSON.stringify(body)).toEqual([402, 'credit-blocked']);
    }
    const copyUrl = await req('POST', '/v1/resources/ledger/url');
    expect([copyUrl.status, copyUrl.body.code]).toEqual([402, 'credit-blocked']);
    expect(localDatabases(tp).get(databaseId)?.power).toBe('stopped');
  });

  it('is charged no running time while stopped', async () => {
    const since = new Date();
    await meterStorage(tp.platform.ctx.db);
    const { rows } = await sql<{ kind: string }>`SELECT kind FROM usage_events
      WHERE subject = ${databaseId} AND at >= ${since}`.execute(tp.platform.ctx.db);
    const kinds = rows.map((r) => r.kind);
    expect(kinds).not.toContain('database_running_seconds');
    expect(kinds).not.toContain('database_memory_gb_seconds');
  });

  it('gives another organization and a read-only key nothing more than before', async () => {
    const theirs = await openDatabaseTunnel(tp, 'ledger', other.token);
    expect([theirs.status, theirs.body.code]).toEqual([404, 'not-found']);
    const theirSql = await req(
      'POST',
      '/v1/resources/ledger/sql',
      { sql: 'SELECT 1' },
      other.token,
    );
    expect(theirSql.status).toBe(404);
    // Another organization cannot open the block for it.
    const grant = await req(
      'POST',
      `/admin/v1/orgs/${org.id}/grants`,
      { amountCents: 100 },
      other.token,
    );
    expect(grant.status).toBe(401);
    const read = await openDatabaseTunnel(tp, 'ledger', reader);
    expect(read.status).toBe(403);
    expect((await req('GET', '/v1/billing/credits')).body.blocked).toBe(true);
    expect(localDatabases(tp).get(databaseId)?.power).toBe('stopped');
  });

  it('wakes on the first connection after a grant, its data intact', async () => {
    const grant = await tp.admin('POST', `/admin/v1/orgs/${org.id}/grants`, { amountCents: 100 });
    expect(grant.status).toBe(201);
    expect((await req('GET', '/v1/billing/credits')).body.blocked).toBe(false);
    expect(await query(url, ca, 'SELECT answer FROM t')).toEqual([{ answer: 42 }]);
    expect(await power()).toBe('running');
    const res = await req('POST', '/v1/resources/ledger/sql', { sql: 'SELECT answer FROM t' });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const { ws } = await openDatabaseTunnel(tp, 'ledger', org.token);
    expect(ws).toBeDefined();
    ws!.close();
  }, 60_000);
});
