/**
 * The `database_sql` tool: runs as `POST /v1/resources/:name/sql`, so the agent rules
 * and the audit of that route apply (production reads only with prodDataRead, always
 * read-only), through both protocol eras' clients.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';
import { createDatabase } from '../databases/helpers.js';
import { legacyClient, modernClient, modernRequest, post } from './helpers.js';

let tp: TestPlatform;
let org: TestOrg;
let other: TestOrg;

async function agentToken(agent: Record<string, unknown>): Promise<{ id: string; token: string }> {
  const res = await tp.request('POST', '/v1/tokens', {
    token: org.token,
    body: { name: 'mcp sql agent', agent },
  });
  expect(res.status).toBe(201);
  return res.body;
}

/** One `database_sql` call over a raw 2026-07-28 POST: the route's answer and isError. */
async function sql(token: string, args: Record<string, unknown>) {
  const res = await post(
    tp.url,
    ...modernRequest(token, 'tools/call', { name: 'database_sql', arguments: args }),
  );
  expect(res.status).toBe(200);
  const result = res.json.result as { isError?: boolean; content: { text: string }[] };
  return { isError: result.isError === true, answer: JSON.parse(result.content[0]!.text) };
}

beforeAll(async () => {
  tp = await startTestPlatform();
  org = await tp.createOrg();
  other = await tp.createOrg();
  await createDatabase(tp, org, { name: 'mcp-sql', kind: 'postgres', memoryMb: 256 });
  await createDatabase(tp, other, { name: 'mcp-sql-theirs', kind: 'postgres', memoryMb: 256 });
}, 180_000);
afterAll(async () => tp?.close());

describe('database_sql', () => {
  it('runs SQL with the 2026-07-28 client and the 2025-11-25 one', async () => {
    const modern = await modernClient(tp.url, org.token);
    try {
      const tool = (await modern.listTools()).tools.find((t) => t.name === 'database_sql')!;
      expect(tool.description).toContain('POST /v1/resources/:name/sql');
      expect(tool.inputSchema).toMatchObject({ required: ['database', 'sql'] });
      const made = await modern.callTool({
        name: 'database_sql',
        arguments: { database: 'mcp-sql', sql: 'CREATE TABLE notes (body text)' },
      });
      expect(made.isError, JSON.stringify(made)).toBeFalsy();
    } finally {
      await modern.close();
    }
    const legacy = await legacyClient(tp.url, org.token);
    try {
      const ins = await legacy.callTool({
        name: 'database_sql',
        arguments: {
          database: 'mcp-sql',
          sql: 'INSERT INTO notes VALUES ($1) RETURNING body',
          params: ['hello'],
        },
      });
      expect(ins.isError).toBeFalsy();
      const [block] = ins.content as { text: string }[];
      expect(JSON.parse(block!.text)).toMatchObject({ command: 'INSERT', rows: [['hello']] });
    } finally {
      await legacy.close();
    }
  });

  it('needs prodDataRead for a production token, runs it read-only, and audits each call', async () => {
    const blind = await agentToken({ class: 'production' });
    expect(
      await sql(blind.token, { database: 'mcp-sql', sql: 'SELECT * FROM notes' }),
    ).toMatchObject({
      isError: true,
      answer: { status: 403, code: 'agent-token-production-data' },
    });
    const reader = await agentToken({ class: 'production', prodDataRead: true });
    const read = await sql(reader.token, { database: 'mcp-sql', sql: 'SELECT body FROM notes' });
    expect(read).toMatchObject({ isError: false, answer: { rows: [['hello']], readOnly: true } });
    const write = await sql(reader.token, {
      database: 'mcp-sql',
      sql: "INSERT INTO notes VALUES ('by prod')",
      readOnly: false,
    });
    expect(write).toMatchObject({
      isError: true,
      answer: { status: 409, code: 'read-only-transaction' },
    });
    const audit = await tp.request('GET', '/v1/agent-actions', { token: org.token });
    const rows = (audit.body as { route: string; verdict: string; tokenId?: string }[])
      .filter((r) => r.route === '/v1/resources/:name/sql')
      .map((r) => r.verdict);
    expect(rows.sort()).toEqual(['allowed', 'allowed', 'refused']);
  });

  it('answers another organization’s database like a missing one', async () => {
    const theirs = await sql(org.token, { database: 'mcp-sql-theirs', sql: 'SELECT 1' });
    expect(theirs).toMatchObject({ isError: true, answer: { status: 404, code: 'not-found' } });
  });

  it('keeps a token limited to apps off databases not attached to them', async () => {
    await tp.request('POST', '/v1/apps', { token: org.token, body: { name: 'mcp-sql-app' } });
    const limited = await agentToken({ class: 'sandbox', apps: ['mcp-sql-app'] });
    expect(await sql(limited.token, { database: 'mcp-sql', sql: 'SELECT 1' })).toMatchObject({
      isError: true,
      answer: { status: 403, code: 'agent-token-app-scope' },
    });
  });
});
