import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';

let tp: TestPlatform;
beforeAll(async () => {
  tp = await startTestPlatform();
});
afterAll(async () => tp?.close());

const paths = (body: { issues?: { path: string }[] }) =>
  (body.issues ?? []).map((i) => i.path).sort();

let appCounter = 0;
const appName = (stem: string) => `${stem}-${++appCounter}`;

describe('operator API authentication', () => {
  it('answers 401 unauthenticated without a token, with a wrong one, or with a customer key', async () => {
    const none = await tp.request('GET', '/admin/v1/orgs');
    expect(none.status).toBe(401);
    expect(none.body.code).toBe('unauthenticated');
    expect(typeof none.body.error).toBe('string');

    const wrong = await tp.request('POST', '/admin/v1/orgs', {
      token: `${tp.operatorToken}x`,
      body: { name: 'sneaky' },
    });
    expect(wrong.status).toBe(401);
    expect(wrong.body.code).toBe('unauthenticated');

    const customer = await tp.createOrg();
    const asCustomer = await tp.request('GET', '/admin/v1/orgs', { token: customer.token });
    expect(asCustomer.status).toBe(401);
    expect(asCustomer.body.code).toBe('unauthenticated');

    // Nothing was created by the refused attempt.
    const list = await tp.admin('GET', '/admin/v1/orgs');
    expect(list.status).toBe(200);
    expect(list.body.map((o: { name: string }) => o.name)).not.toContain('sneaky');
  });

  it('keeps customer routes closed to the operator token', async () => {
    const res = await tp.request('GET', '/v1/tokens', { token: tp.operatorToken });
    expect(res.status).toBe(401);
    expect(res.body.code).toBe('unauthenticated');
  });
});

describe('POST /admin/v1/orgs', () => {
  it('creates an org with its first admin and a working full-access key', async () => {
    const res = await tp.admin('POST', '/admin/v1/orgs', { name: 'Acme' });
    expect(res.status).toBe(201);
    const { org, user, token, key } = res.body;
    expect(org.id).toMatch(/^org-/);
    expect(org.name).toBe('Acme');
    expect(org.prepaid).toBe(true);
    expect(org.region).toBe('local');
    expect(org.suspended).toBe(false);
    expect(org.managedBy).toBeUndefined();
    expect(org.limits).toEqual({
      apps: null,
      computers: null,
      databases: null,
      machines: null,
      memoryMb: null,
      storageGb: null,
    });
    expect(new Date(org.createdAt).getTime()).not.toBeNaN();
    expect(user.orgId).toBe(org.id);
    expect(user.role).toBe('admin');
    expect(user.id).toEqual(expect.any(String));
    expect(token).toEqual(expect.any(String));
    expect(key.token).toBe(token);
    expect(key.id).toMatch(/^tok-/);
    expect(key.orgId).toBe(org.id);
    expect(key.userId).toBe(user.id);
    expect(key.scopes).toBeUndefined();
    expect(key.expiresAt).toBeUndefined();

    const tokens = await tp.request('GET', '/v1/tokens', { token });
    expect(tokens.status).toBe(200);
    expect(tokens.body.map((k: { id: string }) => k.id)).toContain(key.id);
    const credits = await tp.request('GET', '/v1/billing/credits', { token });
    expect(credits.status).toBe(200);
    expect(credits.body.balanceMicros).toBe('0');

    const read = await tp.admin('GET', `/admin/v1/orgs/${org.id}`);
    expect(read.status).toBe(200);
    expect(read.body).toEqual(org);
  });

  it('takes region, prepaid false and an initial grant', async () => {
    const res = await tp.admin('POST', '/admin/v1/orgs', {
      name: 'Elsewhere',
      region: 'eu-west',
      prepaid: false,
    });
    expect(res.status).toBe(201);
    expect(res.body.org.region).toBe('eu-west');
    expect(res.body.org.prepaid).toBe(false);
    const credits = await tp.request('GET', '/v1/billing/credits', { token: res.body.token });
    expect(credits.status).toBe(409);
    expect(credits.body.code).toBe('not-prepaid');

    const granted = await tp.admin('POST', '/admin/v1/orgs', { name: 'Granted', grantCents: 500 });
    expect(granted.status).toBe(201);
    const account = await tp.request('GET', '/v1/billing/credits', { token: granted.body.token });
    expect(account.body.balanceCents).toBe(500);
  });

  it('reports every wrong field at once', async () => {
    const res = await tp.admin('POST', '/admin/v1/orgs', { grantCents: -1, colour: 'blue' });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('bad-request');
    expect(paths(res.body)).toEqual(['colour', 'grantCents', 'name']);
    expect(res.body.error).toContain('name');
    expect(res.body.error).toContain('grantCents');
    expect(res.body.error).toContain('colour');
    for (const issue of res.body.issues) expect(issue.message).toEqual(expect.any(String));
  });

  it.each([
    [{ name: '' }, 'name'],
    [{ name: 'x'.repeat(121) }, 'name'],
    [{ name: 'ok', grantCents: 1.5 }, 'grantCents'],
    [{ name: 'ok', prepaid: 'yes' }, 'prepaid'],
    [{ name: 'ok', region: 'Not A Region' }, 'region'],
  ])('refuses %j naming %s', async (body, field) => {
    const res = await tp.admin('POST', '/admin/v1/orgs', body);
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('bad-request');
    expect(paths(res.body)).toEqual([field]);
  });

  it('refuses managedBy naming no organization', async () => {
    const res = await tp.admin('POST', '/admin/v1/orgs', { name: 'orphan', managedBy: 'org-nope' });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('bad-request');
    expect(paths(res.body)).toEqual(['managedBy']);
  });
});

describe('POST /admin/v1/orgs/:id/users', () => {
  let org: TestOrg;
  beforeAll(async () => {
    org = await tp.createOrg();
  });

  it('adds a member by default, with a working key', async () => {
    const res = await tp.admin('POST', `/admin/v1/orgs/${org.id}/users`, {
      email: 'member@example.com',
    });
    expect(res.status).toBe(201);
    expect(res.body.user).toMatchObject({
      orgId: org.id,
      email: 'member@example.com',
      role: 'member',
    });
    expect(res.body.token).toEqual(expect.any(String));
    const tokens = await tp.request('GET', '/v1/tokens', { token: res.body.token });
    expect(tokens.status).toBe(200);
    const own = tokens.body.find((k: { userId?: string }) => k.userId === res.body.user.id);
    expect(own).toBeDefined();
    expect(own.orgId).toBe(org.id);
  });

  it('adds an admin with a password', async () => {
    const res = await tp.admin('POST', `/admin/v1/orgs/${org.id}/users`, {
      email: 'boss@example.com',
      password: 'correct horse battery',
      role: 'admin',
    });
    expect(res.status).toBe(201);
    expect(res.body.user.role).toBe('admin');
    expect(JSON.stringify(res.body)).not.toContain('correct horse battery');
  });

  it('refuses a password shorter than 12 characters, a bad email and a bad role', async () => {
    const short = await tp.admin('POST', `/admin/v1/orgs/${org.id}/users`, {
      email: 'short@example.com',
      password: 'elevenchars',
    });
    expect(short.status).toBe(400);
    expect(short.body.code).toBe('bad-request');
    expect(paths(short.body)).toEqual(['password']);

    const twelve = await tp.admin('POST', `/admin/v1/orgs/${org.id}/users`, {
      email: 'twelve@example.com',
      password: 'twelve chars',
    });
    expect(twelve.status).toBe(201);

    const all = await tp.admin('POST', `/admin/v1/orgs/${org.id}/users`, {
      email: 'not-an-email',
      password: 'short',
      role: 'owner',
    });
    expect(all.status).toBe(400);
    expect(paths(all.body)).toEqual(['email', 'password', 'role']);

    const missing = await tp.admin('POST', `/admin/v1/orgs/${org.id}/users`, {});
    expect(missing.status).toBe(400);
    expect(paths(missing.body)).toEqual(['email']);
  });

  it('refuses a duplicate email with 409 already-exists, whatever its case or org', async () => {
    const first = await tp.admin('POST', `/admin/v1/orgs/${org.id}/users`, {
      email: 'dup@example.com',
    });
    expect(first.status).toBe(201);
    const again = await tp.admin('POST', `/admin/v1/orgs/${org.id}/users`, {
      email: 'DUP@example.com',
    });
    expect(again.status).toBe(409);
    expect(again.body.code).toBe('already-exists');
    const other = await tp.createOrg();
    const elsewhere = await tp.admin('POST', `/admin/v1/orgs/${other.id}/users`, {
      email: 'dup@example.com',
    });
    expect(elsewhere.status).toBe(409);
    expect(elsewhere.body.code).toBe('already-exists');
  });
});

describe('emails are unique across simultaneous requests', () => {
  it('answers one 201 and 409 already-exists for the rest, never a 500', async () => {
    const org = await tp.createOrg();
    const users = await Promise.all(
      [1, 2, 3, 4].map(() =>
        tp.admin('POST', `/admin/v1/orgs/${org.id}/users`, { email: 'race@example.com' }),
      ),
    );
    expect(users.map((r) => r.status).sort()).toEqual([201, 409, 409, 409]);
    for (const r of users.filter((x) => x.status === 409))
      expect(r.body.code).toBe('already-exists');

    const before = (await tp.admin('GET', '/admin/v1/orgs')).body.length;
    const orgs = await Promise.all(
      [1, 2, 3, 4].map(() =>
        tp.admin('POST', '/admin/v1/orgs', { name: 'racing', email: 'first@racing.example' }),
      ),
    );
    expect(orgs.map((r) => r.status).sort()).toEqual([201, 409, 409, 409]);
    for (const r of orgs.filter((x) => x.status === 409))
      expect(r.body.code).toBe('already-exists');
    // The refused creations left no organization behind.
    const after = (await tp.admin('GET', '/admin/v1/orgs')).body.length;
    expect(after).toBe(before + 1);
  });
});

describe('unknown organizations', () => {
  it.each([
    ['GET', '/admin/v1/orgs/org-missing', undefined],
    ['POST', '/admin/v1/orgs/org-missing/users', { email: 'ghost@example.com' }],
    ['POST', '/admin/v1/orgs/org-missing/grants', { amountCents: 100 }],
    ['POST', '/admin/v1/orgs/org-missing/suspend', undefined],
    ['POST', '/admin/v1/orgs/org-missing/unsuspend', undefined],
    ['PUT', '/admin/v1/orgs/org-missing/limits', { apps: 1 }],
  ])('%s %s answers 404 not-found', async (method, path, body) => {
    const res = await tp.admin(method, path, body);
    expect(res.status).toBe(404);
    expect(res.body.code).toBe('not-found');
  });
});

describe('POST /admin/v1/orgs/:id/grants', () => {
  it('books a grant entry in micro-cents and raises the balance', async () => {
    const org = await tp.createOrg({ grantCents: 100 });
    const res = await tp.admin('POST', `/admin/v1/orgs/${org.id}/grants`, {
      amountCents: 250,
      reason: 'welcome',
    });
    expect(res.status).toBe(201);
    expect(res.body.id).toEqual(expect.any(String));
    expect(res.body.kind).toBe('grant');
    expect(res.body.amountMicros).toBe('250000000');
    expect(res.body.amountCents).toBe(250);
    expect(res.body.detail).toBe('welcome');
    expect(new Date(res.body.at).getTime()).not.toBeNaN();

    const big = await tp.admin('POST', `/admin/v1/orgs/${org.id}/grants`, {
      amountCents: 123_456_789_012,
    });
    expect(big.status).toBe(201);
    expect(big.body.amountMicros).toBe('123456789012000000');

    const credits = await tp.request('GET', '/v1/billing/credits', { token: org.token });
    expect(credits.body.balanceMicros).toBe('123456789362000000');
    expect(credits.body.balanceCents).toBe(123_456_789_362);

    const ledger = await tp.request('GET', '/v1/billing/ledger', { token: org.token });
    expect(ledger.body.entries.map((e: { id: string }) => e.id)).toContain(res.body.id);
  });

  it.each([[{ amountCents: 0 }], [{ amountCents: -5 }], [{ amountCents: 1.5 }], [{}]])(
    'refuses %j with 400',
    async (body) => {
      const org = await tp.createOrg();
      const res = await tp.admin('POST', `/admin/v1/orgs/${org.id}/grants`, body);
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('bad-request');
      expect(paths(res.body)).toEqual(['amountCents']);
    },
  );

  it('refuses a grant to an org without a credit account with 409 not-prepaid', async () => {
    const org = await tp.createOrg({ prepaid: false });
    const res = await tp.admin('POST', `/admin/v1/orgs/${org.id}/grants`, { amountCents: 100 });
    expect(res.status).toBe(409);
    expect(res.body.code).toBe('not-prepaid');
  });
});

describe('suspension', () => {
  it('closes every customer route at once with 403 org-suspended, and unsuspending reopens them', async () => {
    const org = await tp.createOrg();
    const app = appName('susp');
    expect(
      (await tp.request('POST', '/v1/apps', { token: org.token, body: { name: app } })).status,
    ).toBe(201);
    // Warm every cache first: suspension must not wait for one to run out.
    expect((await tp.request('GET', '/v1/tokens', { token: org.token })).status).toBe(200);
    expect((await tp.request('GET', '/v1/apps', { token: org.token })).status).toBe(200);

    const suspended = await tp.admin('POST', `/admin/v1/orgs/${org.id}/suspend`);
    expect(suspended.status).toBe(200);
    expect(suspended.body.id).toBe(org.id);
    expect(suspended.body.suspended).toBe(true);
    expect(new Date(suspended.body.suspendedAt).getTime()).not.toBeNaN();

    const routes: [string, string, unknown?][] = [
      ['GET', '/v1/tokens'],
      ['GET', '/v1/apps'],
      ['GET', `/v1/apps/${app}`],
      ['POST', '/v1/apps', { name: appName('blocked') }],
      ['POST', '/v1/tokens', { name: 'blocked' }],
      ['GET', '/v1/billing/credits'],
      ['GET', '/v1/ssh'],
      ['GET', '/v1/ssh-keys'],
    ];
    for (const [method, path, body] of routes) {
      const res = await tp.request(method, path, { token: org.token, body });
      expect(res.status, `${method} ${path}`).toBe(403);
      expect(res.body.code, `${method} ${path}`).toBe('org-suspended');
    }

    const unsuspended = await tp.admin('POST', `/admin/v1/orgs/${org.id}/unsuspend`);
    expect(unsuspended.status).toBe(200);
    expect(unsuspended.body.suspended).toBe(false);
    expect(unsuspended.body.suspendedAt).toBeUndefined();
    expect((await tp.request('GET', '/v1/tokens', { token: org.token })).status).toBe(200);
    const apps = await tp.request('GET', '/v1/apps', { token: org.token });
    expect(apps.status).toBe(200);
    expect(apps.body.map((a: { name: string }) => a.name)).toEqual([app]);
  });

  it('keeps the first suspension time when suspended twice', async () => {
    const org = await tp.createOrg();
    const first = await tp.admin('POST', `/admin/v1/orgs/${org.id}/suspend`);
    await new Promise((resolve) => setTimeout(resolve, 10));
    const second = await tp.admin('POST', `/admin/v1/orgs/${org.id}/suspend`);
    expect(second.status).toBe(200);
    expect(second.body.suspendedAt).toBe(first.body.suspendedAt);
    const read = await tp.admin('GET', `/admin/v1/orgs/${org.id}`);
    expect(read.body.suspended).toBe(true);
    expect(read.body.suspendedAt).toBe(first.body.suspendedAt);
    // Unsuspending twice is harmless too.
    expect((await tp.admin('POST', `/admin/v1/orgs/${org.id}/unsuspend`)).status).toBe(200);
    const again = await tp.admin('POST', `/admin/v1/orgs/${org.id}/unsuspend`);
    expect(again.status).toBe(200);
    expect(again.body.suspended).toBe(false);
  });

  it('leaves other organizations alone', async () => {
    const a = await tp.createOrg();
    const b = await tp.createOrg();
    expect((await tp.admin('POST', `/admin/v1/orgs/${a.id}/suspend`)).status).toBe(200);
    expect((await tp.request('GET', '/v1/tokens', { token: b.token })).status).toBe(200);
    expect((await tp.request('GET', '/v1/tokens', { token: a.token })).status).toBe(403);
  });
});

describe('PUT /admin/v1/orgs/:id/limits', () => {
  it('caps the number of apps with 403 org-limit-apps, and null lifts the cap', async () => {
    const org = await tp.createOrg();
    const limited = await tp.admin('PUT', `/admin/v1/orgs/${org.id}/limits`, { apps: 1 });
    expect(limited.status).toBe(200);
    expect(limited.body.limits).toMatchObject({ apps: 1, computers: null });

    const first = await tp.request('POST', '/v1/apps', {
      token: org.token,
      body: { name: appName('lim') },
    });
    expect(first.status).toBe(201);
    const second = await tp.request('POST', '/v1/apps', {
      token: org.token,
      body: { name: appName('lim') },
    });
    expect(second.status).toBe(403);
    expect(second.body.code).toBe('org-limit-apps');
    expect(second.body.limit).toBe(1);
    expect(second.body.current).toBe(1);

    // Setting computers alone leaves apps as they are.
    const computers = await tp.admin('PUT', `/admin/v1/orgs/${org.id}/limits`, { computers: 3 });
    expect(computers.body.limits).toMatchObject({ apps: 1, computers: 3 });

    const lifted = await tp.admin('PUT', `/admin/v1/orgs/${org.id}/limits`, { apps: null });
    expect(lifted.status).toBe(200);
    expect(lifted.body.limits).toMatchObject({ apps: null, computers: 3 });
    const now = await tp.request('POST', '/v1/apps', {
      token: org.token,
      body: { name: appName('lim') },
    });
    expect(now.status).toBe(201);
  });

  it('answers the org unchanged for an empty body', async () => {
    const org = await tp.createOrg();
    expect((await tp.admin('PUT', `/admin/v1/orgs/${org.id}/limits`, { apps: 4 })).status).toBe(
      200,
    );
    const res = await tp.admin('PUT', `/admin/v1/orgs/${org.id}/limits`, {});
    expect(res.status).toBe(200);
    expect(res.body.id).toBe(org.id);
    expect(res.body.limits).toMatchObject({ apps: 4, computers: null });
    const missing = await tp.admin('PUT', '/admin/v1/orgs/org-missing/limits', {});
    expect(missing.status).toBe(404);
  });

  it('a limit of 0 forbids any app', async () => {
    const org = await tp.createOrg();
    expect((await tp.admin('PUT', `/admin/v1/orgs/${org.id}/limits`, { apps: 0 })).status).toBe(
      200,
    );
    const res = await tp.request('POST', '/v1/apps', {
      token: org.token,
      body: { name: appName('zero') },
    });
    expect(res.status).toBe(403);
    expect(res.body).toMatchObject({ code: 'org-limit-apps', limit: 0, current: 0 });
  });

  it('refuses negative, fractional and unknown limits', async () => {
    const org = await tp.createOrg();
    const res = await tp.admin('PUT', `/admin/v1/orgs/${org.id}/limits`, {
      apps: -1,
      computers: 1.5,
    });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('bad-request');
    expect(paths(res.body)).toEqual(['apps', 'computers']);
    const unknown = await tp.admin('PUT', `/admin/v1/orgs/${org.id}/limits`, { volumes: 1 });
    expect(unknown.status).toBe(400);
  });
});

describe('limits on databases, machines, memory and storage', () => {
  const put = (org: TestOrg, body: Record<string, unknown>) =>
    tp.admin('PUT', `/admin/v1/orgs/${org.id}/limits`, body);
  const as = (org: TestOrg, method: string, p: string, body?: unknown) =>
    tp.request(method, p, { token: org.token, body });
  /** An image nothing can pull: a refused create must never get as far as pulling it. */
  const image = 'registry.pier.invalid/never-pulled:1';

  it('sets the four limits, reads them back, and leaves absent ones unchanged', async () => {
    const org = await tp.createOrg();
    const set = await put(org, { databases: 2, machines: 3, memoryMb: 4096, storageGb: 100 });
    expect(set.status).toBe(200);
    const all = {
      apps: null,
      computers: null,
      databases: 2,
      machines: 3,
      memoryMb: 4096,
      storageGb: 100,
    };
    expect(set.body.limits).toEqual(all);
    expect((await tp.admin('GET', `/admin/v1/orgs/${org.id}`)).body.limits).toEqual(all);
    const lifted = await put(org, { machines: null, apps: 5 });
    expect(lifted.body.limits).toEqual({ ...all, apps: 5, machines: null });
    const listed = (await tp.admin('GET', '/admin/v1/orgs')).body.find(
      (o: { id: string }) => o.id === org.id,
    );
    expect(listed.limits).toEqual({ ...all, apps: 5, machines: null });
  });

  it('refuses negative and fractional limits with every issue at once, changing nothing', async () => {
    const org = await tp.createOrg();
    expect((await put(org, { databases: 7 })).status).toBe(200);
    const res = await put(org, { databases: -1, machines: 1.5, memoryMb: -512, storageGb: 0.5 });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('bad-request');
    expect(paths(res.body)).toEqual(['databases', 'machines', 'memoryMb', 'storageGb']);
    const text = await put(org, { memoryMb: '1024' });
    expect(text.status).toBe(400);
    expect(paths(text.body)).toEqual(['memoryMb']);
    expect((await tp.admin('GET', `/admin/v1/orgs/${org.id}`)).body.limits).toMatchObject({
      databases: 7,
      machines: null,
      memoryMb: null,
      storageGb: null,
    });
  });

  it('machines: 0 refuses a machine create with 403 org-limit-machines before any host work', async () => {
    const org = await tp.createOrg();
    const app = appName('mlim');
    expect((await as(org, 'POST', '/v1/apps', { name: app })).status).toBe(201);
    expect((await put(org, { machines: 0 })).status).toBe(200);
    const res = await as(org, 'POST', `/v1/apps/${app}/machines?wait=false`, { image });
    expect(res.status, JSON.stringify(res.body)).toBe(403);
    expect(res.body).toMatchObject({ code: 'org-limit-machines', limit: 0, current: 0 });
    expect(res.body.error).toEqual(expect.any(String));
    // volumeGb would make the app's volume first: the refusal comes before that too.
    const withVolume = await as(org, 'POST', `/v1/apps/${app}/machines?wait=false`, {
      image,
      volumeGb: 1,
    });
    expect(withVolume.status).toBe(403);
    expect(withVolume.body.code).toBe('org-limit-machines');
    expect((await as(org, 'GET', `/v1/apps/${app}/machines`)).body).toEqual([]);
    expect((await as(org, 'GET', '/v1/volumes')).body).toEqual([]);
    const rows = await tp.platform.ctx.db
      .selectFrom('machines')
      .select('id')
      .where('org_id', '=', org.id)
      .execute();
    expect(rows).toEqual([]);
  });

  it('memoryMb refuses a machine whose memory would pass it (403 org-limit-memory)', async () => {
    const org = await tp.createOrg();
    const app = appName('memlim');
    expect((await as(org, 'POST', '/v1/apps', { name: app })).status).toBe(201);
    expect((await put(org, { memoryMb: 256 })).status).toBe(200);
    const big = await as(org, 'POST', `/v1/apps/${app}/machines?wait=false`, {
      image,
      memoryMb: 512,
    });
    expect(big.status, JSON.stringify(big.body)).toBe(403);
    expect(big.body).toMatchObject({ code: 'org-limit-memory', limit: 256, current: 0 });
    expect(big.body.error).toContain('512 MB');
    // The default memory (512 MB) counts too.
    const byDefault = await as(org, 'POST', `/v1/apps/${app}/machines?wait=false`, { image });
    expect(byDefault.status).toBe(403);
    expect(byDefault.body.code).toBe('org-limit-memory');
    expect((await as(org, 'GET', `/v1/apps/${app}/machines`)).body).toEqual([]);
  });

  it('storageGb refuses a volume create or resize past it; concurrent creates cannot both slip under', async () => {
    const org = await tp.createOrg();
    expect((await put(org, { storageGb: 10 })).status).toBe(200);
    const over = await as(org, 'POST', '/v1/volumes', { name: appName('vlim'), sizeGb: 11 });
    expect(over.status).toBe(403);
    expect(over.body).toMatchObject({ code: 'org-limit-storage', limit: 10, current: 0 });
    expect(over.body.error).toContain('11 GB');

    const results = await Promise.all(
      [1, 2, 3].map(() => as(org, 'POST', '/v1/volumes', { name: appName('vlim'), sizeGb: 4 })),
    );
    const statuses = results.map((r) => r.status).sort();
    expect(statuses).toEqual([201, 201, 403]);
    const refused = results.find((r) => r.status === 403);
    expect(refused?.body).toMatchObject({ code: 'org-limit-storage', limit: 10, current: 8 });

    const volume = results.find((r) => r.status === 201)?.body as { id: string };
    const grow = await as(org, 'PATCH', `/v1/volumes/${volume.id}`, { sizeGb: 7 });
    expect(grow.status).toBe(403);
    expect(grow.body).toMatchObject({ code: 'org-limit-storage', limit: 10, current: 8 });
    expect((await as(org, 'PATCH', `/v1/volumes/${volume.id}`, { sizeGb: 6 })).status).toBe(200);
    const sizes = (await as(org, 'GET', '/v1/volumes')).body.map(
      (v: { sizeGb: number }) => v.sizeGb,
    );
    expect(sizes.sort()).toEqual([4, 6]);
  });

  it('databases: 1 refuses a second database (403 org-limit-databases); databases count in memory and storage; another org is unaffected', async () => {
    const org = await tp.createOrg();
    const other = await tp.createOrg();
    expect((await put(org, { databases: 1 })).status).toBe(200);
    const first = await as(org, 'POST', '/v1/resources', {
      name: appName('dblim'),
      kind: 'redis',
      persistent: false,
      memoryMb: 128,
      sizeGb: 1,
    });
    expect(first.status, JSON.stringify(first.body)).toBe(201);
    const secondName = appName('dblim');
    const second = await as(org, 'POST', '/v1/resources', {
      name: secondName,
      kind: 'redis',
      persistent: false,
    });
    expect(second.status).toBe(403);
    expect(second.body).toMatchObject({ code: 'org-limit-databases', limit: 1, current: 1 });
    expect((await as(org, 'GET', `/v1/resources/${secondName}`)).status).toBe(404);
    // A branch is a database too.
    const branch = await as(org, 'POST', `/v1/resources/${first.body.name}/branch`, {
      name: appName('dblim'),
    });
    expect(branch.status).toBe(403);
    expect(branch.body).toMatchObject({ code: 'org-limit-databases', limit: 1, current: 1 });

    // The database's 128 MB and 1 GB are in use.
    expect((await put(org, { memoryMb: 600, storageGb: 5 })).status).toBe(200);
    const app = appName('dbmem');
    expect((await as(org, 'POST', '/v1/apps', { name: app })).status).toBe(201);
    const machine = await as(org, 'POST', `/v1/apps/${app}/machines?wait=false`, {
      image,
      memoryMb: 512,
    });
    expect(machine.status).toBe(403);
    expect(machine.body).toMatchObject({ code: 'org-limit-memory', limit: 600, current: 128 });
    const volume = await as(org, 'POST', '/v1/volumes', { name: appName('dbvol'), sizeGb: 5 });
    expect(volume.status).toBe(403);
    expect(volume.body).toMatchObject({ code: 'org-limit-storage', limit: 5, current: 1 });

    // Another organization's limits count its own resources only.
    expect((await put(other, { databases: 0, storageGb: 5 })).status).toBe(200);
    const theirs = await as(other, 'POST', '/v1/volumes', { name: appName('other'), sizeGb: 5 });
    expect(theirs.status).toBe(201);
    const theirDb = await as(other, 'POST', '/v1/resources', { name: appName('o'), kind: 'redis' });
    expect(theirDb.body).toMatchObject({ code: 'org-limit-databases', limit: 0, current: 0 });
    // And an organization without limits is not held by this one's.
    const free = await tp.createOrg();
    expect(
      (await as(free, 'POST', '/v1/volumes', { name: appName('free'), sizeGb: 20 })).status,
    ).toBe(201);
  });
});

describe('managed organizations (X-Platform-Org)', () => {
  let a: TestOrg;
  let b: TestOrg;
  let c: TestOrg;
  const bApp = appName('managed');

  beforeAll(async () => {
    a = await tp.createOrg({ name: 'Manager' });
    b = await tp.createOrg({ name: 'Managed', managedBy: a.id });
    c = await tp.createOrg({ name: 'Unrelated' });
    const res = await tp.request('POST', '/v1/apps', { token: b.token, body: { name: bApp } });
    expect(res.status).toBe(201);
  });

  it('records managedBy on the managed org', async () => {
    const res = await tp.admin('GET', `/admin/v1/orgs/${b.id}`);
    expect(res.body.managedBy).toBe(a.id);
  });

  it("lets the manager's key list and create apps in the managed org", async () => {
    const headers = { 'x-platform-org': b.id };
    const list = await tp.request('GET', '/v1/apps', { token: a.token, headers });
    expect(list.status).toBe(200);
    expect(list.body.map((x: { name: string }) => x.name)).toEqual([bApp]);
    expect(list.body[0].orgId).toBe(b.id);

    const name = appName('made-by-a');
    const created = await tp.request('POST', '/v1/apps', {
      token: a.token,
      headers,
      body: { name },
    });
    expect(created.status).toBe(201);
    expect(created.body.orgId).toBe(b.id);

    const bList = await tp.request('GET', '/v1/apps', { token: b.token });
    expect(bList.body.map((x: { name: string }) => x.name).sort()).toEqual([bApp, name].sort());
    const aList = await tp.request('GET', '/v1/apps', { token: a.token });
    expect(aList.body.map((x: { name: string }) => x.name)).not.toContain(name);
  });

  it('refuses a header naming an organization the key does not manage', async () => {
    for (const target of [c.id, 'org-does-not-exist']) {
      const res = await tp.request('GET', '/v1/apps', {
        token: a.token,
        headers: { 'x-platform-org': target },
      });
      expect(res.status).toBe(403);
      expect(res.body.code).toBe('delegation-refused');
    }
  });

  it("changes nothing when the header names the key's own organization", async () => {
    const plain = await tp.request('GET', '/v1/apps', { token: a.token });
    const own = await tp.request('GET', '/v1/apps', {
      token: a.token,
      headers: { 'x-platform-org': a.id },
    });
    expect(own.status).toBe(200);
    expect(own.body).toEqual(plain.body);
    const name = appName('own');
    const created = await tp.request('POST', '/v1/apps', {
      token: a.token,
      headers: { 'x-platform-org': a.id },
      body: { name },
    });
    expect(created.status).toBe(201);
    expect(created.body.orgId).toBe(a.id);
  });

  it('does not work upwards: the managed org cannot act as its manager', async () => {
    const res = await tp.request('GET', '/v1/apps', {
      token: b.token,
      headers: { 'x-platform-org': a.id },
    });
    expect(res.status).toBe(403);
    expect(res.body.code).toBe('delegation-refused');
  });

  it('refuses delegation into a suspended managed org', async () => {
    const d = await tp.createOrg({ managedBy: a.id });
    expect((await tp.admin('POST', `/admin/v1/orgs/${d.id}/suspend`)).status).toBe(200);
    const res = await tp.request('GET', '/v1/apps', {
      token: a.token,
      headers: { 'x-platform-org': d.id },
    });
    expect(res.status).toBe(403);
    expect(res.body.code).toBe('org-suspended');
    // The manager's own requests are unaffected.
    expect((await tp.request('GET', '/v1/apps', { token: a.token })).status).toBe(200);
  });
});
