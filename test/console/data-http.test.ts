/**
 * The console's data pages over real HTTP, without a browser: tokens (the value in the
 * create answer only), the agent-action audit filters, buckets (objects by prefix, the
 * presigned PUT and GET, CORS rules), a read-only key, and another organization's
 * objects answering like missing ones.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';
import { settled, sleep, waitFor } from '../databases/helpers.js';
import { addPerson, ConsoleVisitor } from './console-client.js';

let tp: TestPlatform;
let org: TestOrg;
let other: TestOrg;
let v: ConsoleVisitor;
let csrf: string;
const EMAIL = 'dora@example.com';

beforeAll(async () => {
  tp = await startTestPlatform();
  org = await tp.createOrg({ name: 'Data Org' });
  other = await tp.createOrg({ name: 'Other Data Org' });
  await addPerson(tp, org.id, EMAIL);
  for (const [token, name] of [
    [other.token, 'theirs-bucket'],
    [org.token, 'ours-bucket'],
  ] as const) {
    const made = await tp.request('POST', '/v1/buckets', { token, body: { name } });
    expect(made.status).toBe(201);
  }
  v = new ConsoleVisitor(tp);
  expect((await v.signIn(EMAIL)).status).toBe(303);
  csrf = await v.csrf();
});
afterAll(async () => tp?.close());

const post = (path: string, form: Record<string, string>, headers?: Record<string, string>) =>
  v.post(path, { _csrf: csrf, ...form }, { origin: tp.url, ...headers });

/** A console visitor whose session key is the given API key (a read-only one, say). */
function visitorWithKey(token: string): ConsoleVisitor {
  const visitor = new ConsoleVisitor(tp);
  visitor.cookie = `pier_console=${encodeURIComponent(token)}`;
  return visitor;
}

describe('tokens', () => {
  it('show a new key once: in the create answer, never on the list', async () => {
    const made = await post('/console/tokens', {
      name: 'ci-deploy',
      scopeRead: 'on',
      ttlSeconds: '3600',
    });
    expect(made.status).toBe(200);
    const value = /class="once-value">([^<]+)</.exec(made.text)?.[1];
    expect(value).toMatch(/\S{20,}/);
    const list = await v.get('/console/tokens');
    expect(list.text).toContain('ci-deploy');
    expect(list.text).not.toContain(value!);
    // The key works, with its scope.
    const apps = await tp.request('GET', '/v1/apps', { token: value! });
    expect(apps.status).toBe(200);

    // Through htmx: a fragment with the value and the fresh list, no page around it.
    const frag = await post(
      '/console/tokens',
      {
        name: 'agent-prod',
        agentClass: 'production',
        prodDataRead: 'on',
        agentApps: 'web, api',
        ttlSeconds: '600',
      },
      { 'hx-request': 'true' },
    );
    expect(frag.status, frag.text).toBe(200);
    expect(frag.text).not.toContain('<html');
    expect(frag.text).toMatch(/once-value/);
    expect(frag.text).toMatch(/agent-prod[\s\S]*production[\s\S]*web api/);
  });

  it('show the route sentence for a body it refuses, and revoke', async () => {
    // A key may not outlast the session's key that creates it (spec 5.6): the page says
    // so, and the route's sentence shows when a form asks for more.
    const forever = await post('/console/tokens', { name: 'forever' });
    expect(forever.status).toBe(400);
    expect(forever.text).toContain('may not outlast the creating key');
    expect((await v.get('/console/tokens')).text).toContain('session-expiry');
    const bad = await post('/console/tokens', {
      name: 'x',
      agentClass: 'sandbox',
      prodDataRead: 'on',
    });
    expect(bad.status).toBe(400);
    expect(bad.text).toContain('bad-request');
    const keys = (await tp.request('GET', '/v1/tokens', { token: org.token })).body as {
      id: string;
      name: string;
    }[];
    const ci = keys.find((k) => k.name === 'ci-deploy')!;
    const revoked = await post(`/console/tokens/${ci.id}/revoke`, {});
    expect(revoked.status).toBe(303);
    expect((await v.get('/console/tokens')).text).not.toContain('ci-deploy');
    // Another organization's key by id: the same 404 as a missing one.
    const theirs = (await tp.request('GET', '/v1/tokens', { token: other.token })).body as {
      id: string;
    }[];
    const missing = await post(`/console/tokens/${theirs[0]!.id}/revoke`, {});
    const none = await post('/console/tokens/tok-doesnotexist/revoke', {});
    expect(missing.status).toBe(404);
    expect(none.status).toBe(404);
    expect(missing.text.replace(theirs[0]!.id, '')).toBe(none.text.replace('tok-doesnotexist', ''));
  });
});

describe('agent-action audit', () => {
  it('filters by token and verdict', async () => {
    const agent = await tp.request('POST', '/v1/tokens', {
      token: org.token,
      body: { name: 'audited-agent', agent: { class: 'production' } },
    });
    expect(agent.status).toBe(201);
    expect((await tp.request('GET', '/v1/apps', { token: agent.body.token })).status).toBe(200);
    const refused = await tp.request('POST', '/v1/apps', {
      token: agent.body.token,
      body: { name: 'nope-app' },
    });
    expect(refused.status).toBe(403);

    const all = await v.get(`/console/audit?token=${agent.body.id}`);
    expect(all.status).toBe(200);
    expect(all.text).toContain('data-verdict="allowed"');
    expect(all.text).toContain('data-verdict="refused"');
    expect(all.text).toContain('agent-token-production-readonly');
    const onlyRefused = await v.get(`/console/audit?token=${agent.body.id}&verdict=refused`);
    expect(onlyRefused.text).not.toContain('data-verdict="allowed"');
    expect(onlyRefused.text).toContain('data-verdict="refused"');
    expect(onlyRefused.text).toContain(`/v1/agent-actions?limit=100&amp;token=${agent.body.id}`);
    const bad = await v.get('/console/audit?limit=0');
    expect(bad.status).toBe(400);
    expect(bad.text).toContain('bad-request');
  });
});

describe('buckets', () => {
  it('create, upload through a presigned PUT, browse by folder, download, delete', async () => {
    expect((await post('/console/buckets', { name: 'console-files' })).status).toBe(303);
    const page = await v.get('/console/buckets');
    expect(page.text).toContain('console-files');

    for (const key of ['docs/a.txt', 'docs/deep/b.txt', 'top.txt']) {
      const signed = await post(
        '/console/buckets/console-files/presign',
        { key, contentType: 'text/plain' },
        { 'hx-request': 'true' },
      );
      expect(signed.status).toBe(200);
      const url = /data-presigned-url="([^"]+)"/.exec(signed.text)![1]!.replace(/&amp;/g, '&');
      const headers = JSON.parse(
        /data-headers="([^"]+)"/.exec(signed.text)![1]!.replace(/&quot;/g, '"'),
      );
      expect(headers).toEqual({ 'content-type': 'text/plain' });
      const put = await fetch(url, { method: 'PUT', headers, body: `bytes of ${key}` });
      expect(put.status).toBe(200);
    }
    const root = await v.get('/console/buckets/console-files');
    expect(root.text).toContain('?prefix=docs%2F');
    expect(root.text).toContain('data-key="top.txt"');
    expect(root.text).not.toContain('data-key="docs/a.txt"');
    const docs = await v.get('/console/buckets/console-files?prefix=docs%2F');
    expect(docs.text).toContain('data-key="docs/a.txt"');
    expect(docs.text).toContain('?prefix=docs%2Fdeep%2F');

    const dl = await post('/console/buckets/console-files/download', { key: 'docs/a.txt' });
    expect(dl.status).toBe(303);
    const got = await fetch(dl.headers.get('location')!);
    expect(await got.text()).toBe('bytes of docs/a.txt');

    const del = await post('/console/buckets/console-files/objects/delete', {
      key: 'docs/a.txt',
      prefix: 'docs/',
    });
    expect(del.status).toBe(303);
    expect(del.headers.get('location')).toBe('/console/buckets/console-files?prefix=docs%2F');
    expect((await v.get('/console/buckets/console-files?prefix=docs%2F')).text).not.toContain(
      'data-key="docs/a.txt"',
    );

    const gone = await post('/console/buckets/console-files/delete', {});
    expect(gone.status).toBe(409);
    expect(await post('/console/buckets/console-files/delete', { force: 'on' })).toMatchObject({
      status: 303,
    });
  });

  it('edit CORS rules; the route names what it refuses', async () => {
    const rules = JSON.stringify([
      { allowedMethods: ['GET'], allowedOrigins: ['https://site.example'] },
    ]);
    expect((await post('/console/buckets/ours-bucket/cors', { rules })).status).toBe(303);
    const page = await v.get('/console/buckets/ours-bucket/cors');
    expect(page.text).toContain('https://site.example');
    const notJson = await post('/console/buckets/ours-bucket/cors', { rules: '[{oops' });
    expect(notJson.status).toBe(400);
    expect(notJson.text).toContain('rules');
  });

  it("answer another organization's bucket like a missing one", async () => {
    for (const path of ['/console/buckets/theirs-bucket', '/console/buckets/theirs-bucket/cors']) {
      const theirs = await v.get(path);
      const missing = await v.get(path.replace('theirs-bucket', 'nosuch-bucket'));
      expect(theirs.status).toBe(404);
      expect(theirs.text.replaceAll('theirs-bucket', 'X')).toBe(
        missing.text.replaceAll('nosuch-bucket', 'X'),
      );
    }
    const signed = await post('/console/buckets/theirs-bucket/presign', { key: 'x' });
    expect(signed.status).toBe(404);
  });

  it('let a read-only key read, and show the route sentence for its writes', async () => {
    const made = await tp.request('POST', '/v1/tokens', {
      token: org.token,
      body: { name: 'reader', scopes: ['read'] },
    });
    const reader = visitorWithKey(made.body.token);
    const list = await reader.get('/console/buckets');
    expect(list.status).toBe(200);
    expect(list.text).toContain('ours-bucket');
    const token = /name="_csrf" value="([^"]+)"/.exec(list.text)![1]!;
    const write = await reader.post('/console/buckets', { _csrf: token, name: 'reader-bucket' });
    expect(write.status).toBe(403);
    expect(write.text).toContain('token-scope');
    const tokens = await reader.get('/console/tokens');
    expect(tokens.status).toBe(403);
    expect(tokens.text).toContain('token-scope');
    // Every data page reads, or shows the route's sentence where it needs a full key.
    for (const path of [
      '/console/databases',
      '/console/volumes',
      '/console/secrets',
      '/console/billing',
      '/console/buckets/ours-bucket/cors',
    ]) {
      const page = await reader.get(path);
      expect(page.status, path).toBe(200);
    }
    const billing = await reader.get('/console/billing');
    expect(billing.text).toContain('token-scope');
  });

  it('refuse a data form posted without the CSRF token or from another site', async () => {
    const noToken = await v.post('/console/buckets', { name: 'csrf-bucket' });
    expect(noToken.status).toBe(403);
    expect(noToken.text).toContain('csrf-failed');
    const crossSite = await v.post(
      '/console/tokens',
      { _csrf: csrf, name: 'x', ttlSeconds: '600' },
      { origin: 'https://evil.example' },
    );
    expect(crossSite.status).toBe(403);
    expect((await tp.request('GET', '/v1/buckets/csrf-bucket', { token: org.token })).status).toBe(
      404,
    );
  });
});

describe('databases', () => {
  it('show the URL once at create and for a copy; branch, fork and restore with moment pickers', async () => {
    const made = await post(
      '/console/databases',
      { name: 'console-pg', kind: 'postgres', memoryMb: '256' },
      { 'hx-request': 'true' },
    );
    expect(made.status, made.text).toBe(200);
    const url = /class="once-value">([^<]+)</.exec(made.text)?.[1];
    expect(url).toMatch(/^postgresql:\/\//);
    expect(made.text).toContain('data-database="console-pg"');
    const list = await v.get('/console/databases');
    expect(list.text).toContain('console-pg');
    expect(list.text).not.toContain(url!);
    expect(list.text).not.toContain('postgresql://');

    const branched = await post('/console/databases/console-pg/branch', {
      name: 'console-pg-br',
      ttlSeconds: '3600',
    });
    expect(branched.status).toBe(303);
    expect(branched.headers.get('location')).toBe('/console/databases/console-pg-br');
    await settled(tp, org, 'console-pg-br');
    const source = await v.get('/console/databases/console-pg');
    expect(source.text).toMatch(/data-database="console-pg-br"[\s\S]*branch of/);
    const copy = await v.get('/console/databases/console-pg-br');
    expect(copy.text).toContain('Get its connection URL');
    const once = await post('/console/databases/console-pg-br/url', {}, { 'hx-request': 'true' });
    expect(once.status, once.text).toBe(200);
    expect(once.text).toMatch(/class="once-value">postgresql:\/\//);
    const twice = await post('/console/databases/console-pg-br/url', {}, { 'hx-request': 'true' });
    expect(twice.status).toBe(409);
    expect(twice.text).toContain('url-handed-out');

    // A fork from the archive as of a moment picked in the browser's zone (an hour ahead
    // of UTC: the wall clock reads an hour later), with an expiry. The archive reaches a
    // moment only after its first base backup: the route says so (422) until then.
    const forked = await waitFor(
      async () => {
        const res = await post('/console/databases/console-pg/fork', {
          name: 'console-pg-fork',
          asOf: new Date(Date.now() + 3600_000).toISOString().slice(0, 19),
          tzOffset: '-60',
          ttlSeconds: '7200',
        });
        if (res.status !== 422) return res;
        await sleep(1000);
        return undefined;
      },
      'the archive to reach the moment',
      90_000,
    );
    expect(forked.status, forked.text).toBe(303);
    const fork = (await tp.request('GET', '/v1/resources/console-pg-fork', { token: org.token }))
      .body;
    expect(fork).toMatchObject({ copyKind: 'fork', sourceName: 'console-pg' });
    expect(fork.expiresAt).toBeDefined();
    const copies = await v.get('/console/databases/console-pg');
    expect(copies.text).toMatch(/data-database="console-pg-fork"[\s\S]*fork of/);
    expect(copies.text).toContain(`datetime="${fork.expiresAt}"`);
    await settled(tp, org, 'console-pg-fork');

    // A whole second (the picker's precision) after the database was ready, so the
    // archive surely reaches it however fast the steps above ran; then let it pass.
    const moment = Math.ceil(Date.now() / 1000) * 1000;
    await new Promise((resolve) => setTimeout(resolve, moment + 1000 - Date.now()));
    const restored = await post('/console/databases/console-pg/restore', {
      asOf: new Date(moment).toISOString().slice(0, 19),
      tzOffset: '0',
      preserveUnderName: 'console-pg-before',
    });
    expect(restored.status, restored.text).toBe(303);
    expect((await settled(tp, org, 'console-pg')).state).toBe('ready');
    expect((await v.get('/console/databases')).text).toContain('data-database="console-pg-before"');

    const noMoment = await post('/console/databases/console-pg/restore', { asOf: '' });
    expect(noMoment.status).toBe(400);
    expect(noMoment.text).toContain('asOf');
  }, 180_000);

  it("answer another organization's database like a missing one", async () => {
    const made = await tp.request('POST', '/v1/resources', {
      token: other.token,
      body: { name: 'theirs-redis', kind: 'redis', memoryMb: 128 },
    });
    expect(made.status).toBe(201);
    const theirs = await v.get('/console/databases/theirs-redis');
    const missing = await v.get('/console/databases/nosuch-redis');
    expect(theirs.status).toBe(404);
    expect(theirs.text.replaceAll('theirs-redis', 'X')).toBe(
      missing.text.replaceAll('nosuch-redis', 'X'),
    );
    const branch = await post('/console/databases/theirs-redis/branch', { name: 'stolen-copy' });
    expect(branch.status).toBe(404);
  }, 60_000);
});

describe('volumes', () => {
  it('create, resize, attach, refuse deleting while attached, detach, delete', async () => {
    expect(
      (await tp.request('POST', '/v1/apps', { token: org.token, body: { name: 'vol-app' } }))
        .status,
    ).toBe(201);
    expect(
      (await post('/console/volumes', { name: 'console-vol', sizeGb: '2', class: 'standard' }))
        .status,
    ).toBe(303);
    const vols = (await tp.request('GET', '/v1/volumes', { token: org.token })).body as {
      id: string;
      name: string;
    }[];
    const id = vols.find((x) => x.name === 'console-vol')!.id;
    expect((await post(`/console/volumes/${id}/resize`, { sizeGb: '3' })).status).toBe(303);
    expect(
      (await post(`/console/volumes/${id}/attach`, { volume: 'console-vol', app: 'vol-app' }))
        .status,
    ).toBe(303);
    const page = await v.get('/console/volumes');
    expect(page.text).toMatch(/data-volume="console-vol"[\s\S]*value="3"[\s\S]*vol-app/);
    const attached = await post(`/console/volumes/${id}/delete`, {});
    expect(attached.status).toBe(409);
    expect(attached.text).toContain('volume-attached');
    expect((await post(`/console/volumes/${id}/detach`, {})).status).toBe(303);
    expect((await post(`/console/volumes/${id}/delete`, {})).status).toBe(303);
    expect((await v.get('/console/volumes')).text).not.toContain('console-vol');
    const bad = await post('/console/volumes', { name: 'bad-vol', sizeGb: 'lots' });
    expect(bad.status).toBe(400);
    expect(bad.text).toContain('sizeGb');
  });

  it("answer another organization's volume like a missing one", async () => {
    const made = await tp.request('POST', '/v1/volumes', {
      token: other.token,
      body: { name: 'theirs-vol', sizeGb: 1 },
    });
    expect(made.status).toBe(201);
    const theirs = await post(`/console/volumes/${made.body.id}/delete`, {});
    const missing = await post('/console/volumes/vol-doesnotexist/delete', {});
    expect(theirs.status).toBe(404);
    expect(missing.status).toBe(404);
  });
});

describe('secrets', () => {
  const VALUE = 'correct-horse-battery-staple-4711';

  it('set and delete by name, the value never in a page, address or refusal', async () => {
    expect(
      (await tp.request('POST', '/v1/apps', { token: org.token, body: { name: 'secret-app' } }))
        .status,
    ).toBe(201);
    expect((await v.get('/console/secrets')).text).toContain('/console/secrets/secret-app');
    const set = await post('/console/secrets/secret-app', {
      name: 'API_KEY',
      value: VALUE,
      build: 'on',
    });
    expect(set.status).toBe(303);
    expect(set.headers.get('location')).toBe('/console/secrets/secret-app');
    const page = await v.get('/console/secrets/secret-app');
    expect(page.text).toMatch(/data-secret="API_KEY"[\s\S]*yes/);
    expect(page.text).not.toContain(VALUE);
    const refused = await post('/console/secrets/secret-app', { name: 'bad name!', value: VALUE });
    expect(refused.status).toBe(400);
    expect(refused.text).not.toContain(VALUE);
    expect((await post('/console/secrets/secret-app/delete', { name: 'API_KEY' })).status).toBe(
      303,
    );
    expect((await v.get('/console/secrets/secret-app')).text).not.toContain('API_KEY');
  });

  it("answer another organization's app like a missing one", async () => {
    expect(
      (
        await tp.request('POST', '/v1/apps', {
          token: other.token,
          body: { name: 'theirs-secrets' },
        })
      ).status,
    ).toBe(201);
    const theirs = await v.get('/console/secrets/theirs-secrets');
    const missing = await v.get('/console/secrets/nosuch-secrets');
    expect(theirs.status).toBe(404);
    expect(theirs.text.replaceAll('theirs-secrets', 'X')).toBe(
      missing.text.replaceAll('nosuch-secrets', 'X'),
    );
    const write = await post('/console/secrets/theirs-secrets', { name: 'X', value: VALUE });
    expect(write.status).toBe(404);
    expect(write.text).not.toContain(VALUE);
  });
});

describe('billing', () => {
  it('shows balance, ledger and a chart per usage kind; refusals in place', async () => {
    expect(
      (
        await tp.admin('POST', `/admin/v1/orgs/${org.id}/grants`, {
          amountCents: 1234,
          reason: 'welcome',
        })
      ).status,
    ).toBe(201);
    const hour = 3600_000;
    await tp.platform.ctx.db
      .insertInto('usage_events')
      .values([
        {
          org_id: org.id,
          kind: 'machine_running_seconds',
          quantity: '3600',
          at: new Date(Date.now() - 2 * hour),
        },
        {
          org_id: org.id,
          kind: 'machine_running_seconds',
          quantity: '1800',
          at: new Date(Date.now() - 30 * hour),
        },
        {
          org_id: org.id,
          kind: 'bucket_bytes',
          quantity: '5000000',
          at: new Date(Date.now() - 3 * hour),
        },
        { org_id: other.id, kind: 'theirs_kind', quantity: '1', at: new Date(Date.now() - hour) },
      ])
      .execute();
    const page = await v.get('/console/billing?period=7d');
    expect(page.status).toBe(200);
    expect(page.text).toMatch(/class="balance-amount">€12\.34</);
    expect(page.text).toMatch(/data-kind="grant"[\s\S]*€12\.34[\s\S]*welcome/);
    // One chart per usage kind of the period: the two written here, and whatever the
    // metering tick recorded of this file's earlier storage (it runs each minute).
    const kinds = await tp.platform.ctx.db
      .selectFrom('usage_events')
      .select('kind')
      .distinct()
      .where('org_id', '=', org.id)
      .where('at', '>', new Date(Date.now() - 7 * 24 * hour))
      .execute();
    expect(kinds.length).toBeGreaterThanOrEqual(2);
    expect(page.text.match(/<svg/g)).toHaveLength(kinds.length);
    expect(page.text).toContain('data-kind="machine_running_seconds"');
    expect(page.text).toContain('total 5.4k');
    expect(page.text).not.toContain('theirs_kind');
    expect(page.text).not.toMatch(/\sstyle=|<style/);
    expect(page.text).toContain('id="billing-actions"');
    expect(page.text).toContain('/v1/usage?from=');
    // The last 24 hours leave out the event of 30 hours ago.
    expect((await v.get('/console/billing?period=24h')).text).toContain('total 3.6k');

    // An organization without a credit account: the balance's refusal, the rest shown.
    const postpaid = await tp.createOrg({ name: 'Postpaid Org', prepaid: false });
    await addPerson(tp, postpaid.id, 'pat@example.com');
    const pat = new ConsoleVisitor(tp);
    expect((await pat.signIn('pat@example.com')).status).toBe(303);
    const theirs = await pat.get('/console/billing');
    expect(theirs.status).toBe(200);
    expect(theirs.text).toContain('not-prepaid');
    expect(theirs.text).toContain('No usage in this period.');
  });
});
