/**
 * The keyless OAuth entrances are bounded in total, whatever number of addresses a flood
 * comes from: at most 10,000 registered clients nobody approved yet and 10,000 pending
 * consent requests are kept (the defaults), the oldest forgotten first; approved clients
 * and decided requests stay.
 */
import { sql } from 'kysely';
import type * as oauth from 'oauth4webapi';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OAUTH_TOTALS } from '../../src/oauth/totals.js';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';
import { consoleKey, decide, discover, register, requestIdOf, startLogin } from './helpers.js';

const REDIRECT = 'http://127.0.0.1:7779/cb';
const HOUR = 3600_000;

let tp: TestPlatform;
let org: TestOrg;
let key: string;
let as: oauth.AuthorizationServer;

beforeAll(async () => {
  tp = await startTestPlatform();
  org = await tp.createOrg();
  key = await consoleKey(tp, org.id, 'totals@example.com');
  as = await discover(tp.url);
});
afterAll(async () => tp?.close());

const count = async (query: ReturnType<typeof sql<{ n: number }>>) =>
  (await query.execute(tp.platform.ctx.db)).rows[0]!.n;

describe('OAuth totals', () => {
  it('keeps at most 10,000 unapproved clients, forgetting the oldest; approved ones stay', async () => {
    const cap = OAUTH_TOTALS.unusedClients;
    expect(cap).toBe(10_000);
    // An approved client, older than all: a person's login made a grant for it.
    const approved = await register(as, REDIRECT);
    const login = await startLogin(as, approved, REDIRECT);
    await decide(tp, key, { requestId: await requestIdOf(login.authorizeUrl), approve: true });
    // The cap's worth of unapproved clients, as a flood from many addresses leaves them.
    const base = Date.now() - HOUR;
    await sql`
      INSERT INTO oauth_clients (id, redirect_uris, grant_types, response_types, registered_from, created_at)
      SELECT 'mcpc-flood-' || lpad(i::text, 5, '0'), ARRAY[${REDIRECT}], ARRAY['authorization_code'],
             ARRAY['code'], '2001:db8::' || to_hex(i), ${new Date(base)}::timestamptz + i * interval '1 ms'
      FROM generate_series(1, ${cap - 1}) AS i`.execute(tp.platform.ctx.db);
    const unused = sql<{
      n: number;
    }>`SELECT count(*)::int AS n FROM oauth_clients WHERE used_at IS NULL`;
    expect(await count(unused)).toBe(cap - 1);

    const first = await register(as, REDIRECT);
    expect(await count(unused)).toBe(cap);
    const second = await register(as, REDIRECT);
    expect(await count(unused)).toBe(cap);
    const third = await register(as, REDIRECT);
    expect(await count(unused)).toBe(cap);

    const ids = async (...list: string[]) =>
      (
        await tp.platform.ctx.db
          .selectFrom('oauth_clients')
          .select('id')
          .where('id', 'in', list)
          .execute()
      ).map((r) => r.id);
    // The two oldest unapproved were forgotten; the newest and the approved one stay.
    expect(await ids('mcpc-flood-00001', 'mcpc-flood-00002')).toEqual([]);
    expect(await ids('mcpc-flood-00003')).toEqual(['mcpc-flood-00003']);
    expect(
      (await ids(approved.client_id, first.client_id, second.client_id, third.client_id)).sort(),
    ).toEqual([approved.client_id, first.client_id, second.client_id, third.client_id].sort());
  });

  it('keeps at most 10,000 pending consent requests, forgetting the oldest; decided ones stay', async () => {
    const cap = OAUTH_TOTALS.pendingRequests;
    expect(cap).toBe(10_000);
    const client = await register(as, REDIRECT);
    // A decided request, older than all.
    const decided = await requestIdOf((await startLogin(as, client, REDIRECT)).authorizeUrl);
    await decide(tp, key, { requestId: decided, approve: true });
    const base = Date.now() - HOUR;
    const pendingNow = sql<{ n: number }>`
      SELECT count(*)::int AS n FROM oauth_requests WHERE status = 'pending'`;
    const already = await count(pendingNow);
    await sql`
      INSERT INTO oauth_requests (id, client_id, verified, redirect_uri, code_challenge, scopes,
                                  requested_from, created_at, expires_at)
      SELECT 'consent-flood-' || lpad(i::text, 5, '0'), ${client.client_id}, false, ${REDIRECT},
             repeat('a', 43), ARRAY['mcp'], '2001:db8::' || to_hex(i),
             ${new Date(base)}::timestamptz + i * interval '1 ms', now() + interval '10 minutes'
      FROM generate_series(1, ${cap - 1 - already}) AS i`.execute(tp.platform.ctx.db);
    expect(await count(pendingNow)).toBe(cap - 1);

    const fresh: string[] = [];
    for (let i = 0; i < 3; i++) {
      fresh.push(await requestIdOf((await startLogin(as, client, REDIRECT)).authorizeUrl));
      expect(await count(pendingNow)).toBe(cap);
    }
    const left = (
      await tp.platform.ctx.db
        .selectFrom('oauth_requests')
        .select(['id', 'status'])
        .where('id', 'in', ['consent-flood-00001', 'consent-flood-00002', 'consent-flood-00003'])
        .execute()
    ).map((r) => r.id);
    expect(left).toEqual(['consent-flood-00003']);
    // The newest can be looked at and decided; the decided one is still there.
    const lookup = await tp.request('POST', '/v1/oauth/consent/lookup', {
      token: key,
      body: { requestId: fresh[2] },
    });
    expect(lookup.status).toBe(200);
    const kept = await tp.platform.ctx.db
      .selectFrom('oauth_requests')
      .select('status')
      .where('id', '=', decided)
      .executeTakeFirst();
    expect(kept?.status).toBe('approved');
  });
});
