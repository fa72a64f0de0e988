/**
 * 120 tool calls per minute per organization (spec 8), counted in PostgreSQL so every
 * replica shares the count: a count another replica wrote holds this one back.
 */
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { ApiError } from '../../src/errors/api-error.js';
import { countMcpToolCall } from '../../src/services/mcp-rate-limit.js';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';
import { modernRequest, post } from './helpers.js';

let tp: TestPlatform;
let org: TestOrg;
let other: TestOrg;

beforeAll(async () => {
  tp = await startTestPlatform();
  org = await tp.createOrg();
  other = await tp.createOrg();
});
afterAll(async () => tp?.close());

it('answers 429 with Retry-After past 120 tool calls a minute, per organization', async () => {
  const toolCall = (token: string) =>
    post(tp.url, ...modernRequest(token, 'tools/call', { name: 'apps_list', arguments: {} }));
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
  const limited = await toolCall(org.token);
  expect(limited.status).toBe(429);
  expect(limited.json.code).toBe('rate-limited');
  const retry = Number(limited.headers.get('retry-after'));
  expect(retry).toBeGreaterThanOrEqual(1);
  expect(retry).toBeLessThanOrEqual(60);
  // Protocol traffic is not a tool call; another organization has its own count.
  expect((await post(tp.url, ...modernRequest(org.token, 'tools/list'))).status).toBe(200);
  expect((await toolCall(other.token)).status).toBe(200);
});

it('allows 120 calls in a window and tells when the next one opens', async () => {
  const at = new Date('2026-01-01T10:00:45.200Z');
  for (let i = 0; i < 120; i++) await countMcpToolCall(tp.platform.ctx.db, 'org-window', at);
  const refused = await countMcpToolCall(tp.platform.ctx.db, 'org-window', at).catch((e) => e);
  expect(refused).toBeInstanceOf(ApiError);
  expect(refused).toMatchObject({ code: 'rate-limited', status: 429, retryAfter: 15 });
  // The next window starts afresh, and sweeps the organization's old one.
  await countMcpToolCall(tp.platform.ctx.db, 'org-window', new Date('2026-01-01T10:01:00Z'));
  const rows = await tp.platform.ctx.db
    .selectFrom('mcp_rate_windows')
    .select(['window_start', 'calls'])
    .where('org_id', '=', 'org-window')
    .execute();
  expect(rows).toEqual([{ window_start: new Date('2026-01-01T10:01:00Z'), calls: 1 }]);
});

it('counts every tool call in the shared table', async () => {
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
  expect(Number(after!.n) - Number(before!.n)).toBe(3);
});

it('counts calls that arrive together exactly: each gets its own place in the window', async () => {
  const at = new Date('2026-01-01T11:00:10Z');
  const outcomes = await Promise.all(
    Array.from({ length: 130 }, () =>
      countMcpToolCall(tp.platform.ctx.db, 'org-burst', at).then(
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
  expect(row.calls).toBe(130);
});
