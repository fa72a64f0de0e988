/**
 * 120 tool calls per minute per organization (spec 8), counted in PostgreSQL so every
 * replica shares the count: a replica leases places from the shared row, a count another
 * replica wrote holds this one back, and two replicas together never pass 120.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { resolveConfig } from '../../src/config.js';
import { ApiError } from '../../src/errors/api-error.js';
import { startPlatform, type Platform } from '../../src/platform.js';
import { countMcpToolCall } from '../../src/services/mcp-rate-limit.js';
import type { Db } from '../../src/store/db.js';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';
import { modernRequest, post } from './helpers.js';

let tp: TestPlatform;
let replica: Platform;
let replicaDir: string;
let org: TestOrg;
let other: TestOrg;

beforeAll(async () => {
  tp = await startTestPlatform();
  // A second replica on the same database, as behind a balancer.
  replicaDir = await mkdtemp(path.join(os.tmpdir(), 'pier-replica-'));
  replica = await startPlatform(
    resolveConfig({
      listen: '127.0.0.1:0',
      servicesPort: 0, // not the default 8443: test files run side by side
      sshListen: '127.0.0.1:0',
      dataDir: replicaDir,
      databaseUrl: tp.db.url,
      logLevel: 'silent',
      operatorToken: tp.operatorToken,
    }),
  );
  org = await tp.createOrg();
  other = await tp.createOrg();
});
afterAll(async () => {
  await replica?.close();
  if (replicaDir) await rm(replicaDir, { recursive: true, force: true });
  await tp?.close();
});

/** One count as a promise, whether a leased place admitted it at once or not. */
const count = async (db: Db, orgId: string, at: Date) => countMcpToolCall(db, orgId, at);

const toolCall = (url: string, token: string) =>
  post(url, ...modernRequest(token, 'tools/call', { name: 'apps_list', arguments: {} }));

it('answers 429 with Retry-After past 120 tool calls a minute, per organization', async () => {
  // Another replica's calls: the current and the next window are full (a minute may turn
  // while the test runs).
  const admin = new pg.Client({ connectionString: tp.db.url });
  await admin.connect();
  try {
    const minute = Math.floor(Date.now() / 60_000) * 60_000;
    for (const start of [minute, minute + 60_000]) {
      await admin.query(
        'INSERT INTO mcp_rate_windows (org_id, window_start, calls) VALUES ($1, $2, 120)',
        [org.id, new Date(start)],
      );
    }
  } finally {
    await admin.end();
  }
  const limited = await toolCall(tp.url, org.token);
  expect(limited.status).toBe(429);
  expect(limited.json.code).toBe('rate-limited');
  const retry = Number(limited.headers.get('retry-after'));
  expect(retry).toBeGreaterThanOrEqual(1);
  expect(retry).toBeLessThanOrEqual(60);
  // Protocol traffic is not a tool call; another organization has its own count.
  expect((await post(tp.url, ...modernRequest(org.token, 'tools/list'))).status).toBe(200);
  expect((await toolCall(tp.url, other.token)).status).toBe(200);
});

it('allows 120 calls in a window and tells when the next one opens', async () => {
  const at = new Date('2026-01-01T10:00:45.200Z');
  for (let i = 0; i < 120; i++) await count(tp.platform.ctx.db, 'org-window', at);
  const refused = await count(tp.platform.ctx.db, 'org-window', at).catch((e) => e);
  expect(refused).toBeInstanceOf(ApiError);
  expect(refused).toMatchObject({ code: 'rate-limited', status: 429, retryAfter: 15 });
  // The next window starts afresh, and sweeps the organization's old one.
  await count(tp.platform.ctx.db, 'org-window', new Date('2026-01-01T10:01:00Z'));
  const rows = await tp.platform.ctx.db
    .selectFrom('mcp_rate_windows')
    .select(['window_start', 'calls'])
    .where('org_id', '=', 'org-window')
    .execute();
  expect(rows.map((r) => r.window_start)).toEqual([new Date('2026-01-01T10:01:00Z')]);
  // A busy organization leases several places at once, at most an eighth of the limit.
  expect(rows[0]!.calls).toBeGreaterThanOrEqual(1);
  expect(rows[0]!.calls).toBeLessThanOrEqual(15);
});

it('hands out only places leased from the shared table', async () => {
  const before = await tp.platform.ctx.db
    .selectFrom('mcp_rate_windows')
    .select(({ fn }) => fn.sum<number>('calls').as('n'))
    .where('org_id', '=', other.id)
    .executeTakeFirst();
  for (let i = 0; i < 3; i++) {
    await post(
      tp.url,
      ...modernRequest(other.token, 'tools/call', { name: 'apps_list', arguments: {} }),
    );
  }
  const after = await tp.platform.ctx.db
    .selectFrom('mcp_rate_windows')
    .select(({ fn }) => fn.sum<number>('calls').as('n'))
    .where('org_id', '=', other.id)
    .executeTakeFirst();
  // Three calls took three places leased in the row (a lease may hold a few more).
  expect(Number(after!.n) - Number(before!.n)).toBeGreaterThanOrEqual(3);
  expect(Number(after!.n) - Number(before!.n)).toBeLessThanOrEqual(3 + 15);
});

it('leases places in blocks: a busy organization does not query once per call', async () => {
  const at = new Date('2026-01-01T12:00:10Z');
  const db = tp.platform.ctx.db;
  for (let i = 0; i < 60; i++) await count(db, 'org-blocks', at);
  const row = await db
    .selectFrom('mcp_rate_windows')
    .select('calls')
    .where('org_id', '=', 'org-blocks')
    .executeTakeFirstOrThrow();
  // The places leased cover the 60 calls, with at most one block left over.
  expect(row.calls).toBeGreaterThanOrEqual(60);
  expect(row.calls).toBeLessThanOrEqual(60 + 15);
  // Most calls were admitted at once from the lease: no promise, no query.
  let immediate = 0;
  for (let i = 0; i < 30; i++) {
    const counting = countMcpToolCall(db, 'org-blocks', at);
    if (counting === undefined) immediate++;
    else await counting;
  }
  expect(immediate).toBeGreaterThan(20);
});

it('counts calls that arrive together exactly: each gets its own place in the window', async () => {
  const at = new Date('2026-01-01T11:00:10Z');
  const outcomes = await Promise.all(
    Array.from({ length: 130 }, () =>
      count(tp.platform.ctx.db, 'org-burst', at).then(
        () => 'ok',
        (e: ApiError) => e.code,
      ),
    ),
  );
  expect(outcomes.filter((o) => o === 'ok')).toHaveLength(120);
  expect(outcomes.filter((o) => o === 'rate-limited')).toHaveLength(10);
  const row = await tp.platform.ctx.db
    .selectFrom('mcp_rate_windows')
    .select('calls')
    .where('org_id', '=', 'org-burst')
    .executeTakeFirstOrThrow();
  // Leases never ask for more than the replica last saw left.
  expect(row.calls).toBe(120);
});

it('two replicas share the 120: no more succeed in total, then 429 with Retry-After', async () => {
  const shared = await tp.createOrg();
  // All 140 calls within one minute: start just after a minute turns if it is about to.
  const intoMinute = Date.now() % 60_000;
  if (intoMinute > 45_000) await new Promise((r) => setTimeout(r, 60_500 - intoMinute));
  const minute = Math.floor(Date.now() / 60_000);
  const statuses: number[] = [];
  const refusals: { code: string; retryAfter: number }[] = [];
  // Ten clients at a time, alternating between the replicas.
  await Promise.all(
    Array.from({ length: 10 }, async (_, client) => {
      for (let i = 0; i < 14; i++) {
        const url = (client + i) % 2 === 0 ? tp.url : replica.url;
        const res = await toolCall(url, shared.token);
        statuses.push(res.status);
        if (res.status === 429) {
          refusals.push({
            code: res.json.code,
            retryAfter: Number(res.headers.get('retry-after')),
          });
        }
      }
    }),
  );
  expect(Math.floor(Date.now() / 60_000)).toBe(minute); // else the test itself is void
  expect(statuses.filter((s) => s === 200).length).toBeLessThanOrEqual(120);
  // The places one replica leased and did not use are lost for the minute, never more.
  expect(statuses.filter((s) => s === 200).length).toBeGreaterThanOrEqual(120 - 2 * 15);
  expect(statuses.filter((s) => s !== 200 && s !== 429)).toEqual([]);
  expect(refusals.length).toBeGreaterThanOrEqual(20);
  for (const r of refusals) {
    expect(r.code).toBe('rate-limited');
    expect(r.retryAfter).toBeGreaterThanOrEqual(1);
    expect(r.retryAfter).toBeLessThanOrEqual(60);
  }
  // Both replicas refuse now, each from what it learnt of the shared row.
  expect((await toolCall(tp.url, shared.token)).status).toBe(429);
  expect((await toolCall(replica.url, shared.token)).status).toBe(429);
});
