import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEVICE_CODE_TTL_S, DEVICE_POLL_INTERVAL_S } from '../../src/services/device.js';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';

let tp: TestPlatform;
let org: TestOrg;
/** The platform's clock runs this far ahead of the real one; tests move it forward. */
let offsetMs = 0;

const now = () => Date.now() + offsetMs;
/** Lets the platform's clock pass `seconds` without sleeping. */
const advance = (seconds: number) => {
  offsetMs += seconds * 1000;
};

interface DeviceCode {
  deviceCode: string;
  userCode: string;
  verificationUri: string;
  verificationUriComplete: string;
  expiresIn: number;
  interval: number;
}

async function newCode(body: Record<string, unknown> = {}): Promise<DeviceCode> {
  const res = await tp.request('POST', '/v1/device/code', { body });
  expect(res.status).toBe(201);
  return res.body;
}

const poll = (deviceCode: string) =>
  tp.request('POST', '/v1/device/token', { body: { deviceCode } });

const approve = (userCode: string, token: string, approved?: boolean) =>
  tp.request('POST', '/v1/device/approve', {
    token,
    body: approved === undefined ? { userCode } : { userCode, approve: approved },
  });

beforeAll(async () => {
  tp = await startTestPlatform({}, { clock: () => new Date(now()) });
  org = await tp.createOrg({ name: 'Device Org' });
});
afterAll(async () => tp?.close());

describe('device login, end to end', () => {
  it('issues a code, makes the CLI wait, and hands out a working key exactly once', async () => {
    const code = await newCode({ client: 'pier-cli', version: '1.2.3' });
    expect(Object.keys(code).sort()).toEqual(
      [
        'deviceCode',
        'expiresIn',
        'interval',
        'userCode',
        'verificationUri',
        'verificationUriComplete',
      ].sort(),
    );
    expect(code.deviceCode).toEqual(expect.any(String));
    expect(code.deviceCode.length).toBeGreaterThanOrEqual(32);
    expect(code.userCode).toMatch(/^[A-Z]{4}-[A-Z]{4}$/);
    expect(code.verificationUri).toBe(`${tp.platform.config.publicUrl}/console/device`);
    expect(code.verificationUriComplete.startsWith(code.verificationUri)).toBe(true);
    expect(code.verificationUriComplete).toContain(code.userCode);
    expect(code.expiresIn).toBe(DEVICE_CODE_TTL_S);
    expect(code.expiresIn).toBe(600);
    expect(code.interval).toBe(DEVICE_POLL_INTERVAL_S);
    expect(code.interval).toBeGreaterThan(0);

    // Not approved yet.
    const pending = await poll(code.deviceCode);
    expect(pending.status).toBe(400);
    expect(pending.body.code).toBe('authorization-pending');

    // Polling again at once is too fast.
    const tooFast = await poll(code.deviceCode);
    expect(tooFast.status).toBe(429);
    expect(tooFast.body.code).toBe('rate-limited');
    const retryAfter = Number(tooFast.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(code.interval);

    // The person looks at what asks to sign in.
    const lookup = await tp.request('POST', '/v1/device/lookup', {
      token: org.token,
      body: { userCode: code.userCode },
    });
    expect(lookup.status).toBe(200);
    expect(lookup.body.client).toBe('pier-cli');
    expect(lookup.body.version).toBe('1.2.3');
    expect(lookup.body.requestedFrom).toMatch(/127\.0\.0\.1/);
    const requestedAt = new Date(lookup.body.requestedAt).getTime();
    const expiresAt = new Date(lookup.body.expiresAt).getTime();
    expect(Math.abs(requestedAt - now())).toBeLessThan(30_000);
    expect(expiresAt - requestedAt).toBe(DEVICE_CODE_TTL_S * 1000);

    // ...and approves it.
    const ok = await approve(code.userCode, org.token);
    expect(ok.status).toBe(200);
    expect(ok.body).toEqual({ ok: true, approved: true });

    // The approved code is no longer pending: lookup and a second approval find nothing.
    const lookupAgain = await tp.request('POST', '/v1/device/lookup', {
      token: org.token,
      body: { userCode: code.userCode },
    });
    expect(lookupAgain.status).toBe(404);
    const approveAgain = await approve(code.userCode, org.token);
    expect(approveAgain.status).toBe(404);

    // The CLI polls after waiting the interval.
    advance(code.interval);
    const done = await poll(code.deviceCode);
    expect(done.status).toBe(200);
    expect(done.body.token).toEqual(expect.any(String));
    expect(done.body.org).toEqual({ id: org.id, name: 'Device Org' });

    // The key works and is a full-access key of the person who approved.
    const tokens = await tp.request('GET', '/v1/tokens', { token: done.body.token });
    expect(tokens.status).toBe(200);
    const cliKey = tokens.body.find((k: { prefix: string }) =>
      done.body.token.startsWith(k.prefix),
    );
    expect(cliKey).toBeDefined();
    expect(cliKey.orgId).toBe(org.id);
    expect(cliKey.userId).toBe(org.userId);
    expect(cliKey.scopes).toBeUndefined();
    expect(cliKey.name).toContain('pier-cli');
    // It ends by itself: 90 days (PIER_DEVICE_KEY_TTL_DAYS) from the moment it was handed out.
    expect(tp.platform.config.deviceKeyTtlDays).toBe(90);
    const term = new Date(cliKey.expiresAt).getTime() - new Date(cliKey.createdAt).getTime();
    expect(term).toBe(90 * 86_400_000);
    expect(cliKey.expired).toBe(false);

    // The code is used up.
    advance(code.interval);
    const reused = await poll(code.deviceCode);
    expect(reused.status).toBe(410);
    expect(reused.body.code).toBe('gone');
  });

  it('keeps refusing a poll that comes sooner than the interval, until it has passed', async () => {
    const code = await newCode();
    expect((await poll(code.deviceCode)).body.code).toBe('authorization-pending');
    advance(code.interval - 2);
    const early = await poll(code.deviceCode);
    expect(early.status).toBe(429);
    expect(early.body.code).toBe('rate-limited');
    expect(Number(early.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    // A client that honours Retry-After is let through next time.
    advance(Number(early.headers.get('retry-after')));
    const later = await poll(code.deviceCode);
    expect(later.status).toBe(400);
    expect(later.body.code).toBe('authorization-pending');
  });

  it('answers a flood of simultaneous polls of an approved code with exactly one key', async () => {
    const code = await newCode();
    expect((await approve(code.userCode, org.token)).status).toBe(200);
    const answers = await Promise.all(Array.from({ length: 6 }, () => poll(code.deviceCode)));
    const ok = answers.filter((a) => a.status === 200);
    expect(ok).toHaveLength(1);
    for (const a of answers.filter((x) => x.status !== 200)) {
      expect([410, 429]).toContain(a.status);
    }
    expect((await tp.request('GET', '/v1/tokens', { token: ok[0]?.body.token })).status).toBe(200);
  });

  it('accepts a request without a body, and a user code typed in lower case without the dash', async () => {
    const res = await tp.request('POST', '/v1/device/code');
    expect(res.status).toBe(201);
    const code: DeviceCode = res.body;
    const typed = code.userCode.replace('-', '').toLowerCase();
    const lookup = await tp.request('POST', '/v1/device/lookup', {
      token: org.token,
      body: { userCode: typed },
    });
    expect(lookup.status).toBe(200);
    expect(lookup.body.client).toBeNull();
    expect(lookup.body.version).toBeNull();
    const ok = await approve(typed, org.token);
    expect(ok.status).toBe(200);
    expect(ok.body).toEqual({ ok: true, approved: true });
    const done = await poll(code.deviceCode);
    expect(done.status).toBe(200);
    expect(done.body.org.id).toBe(org.id);
  });

  it('hands the key of the approving organization, not of another one', async () => {
    const other = await tp.createOrg({ name: 'Other Org' });
    const code = await newCode({ client: 'x' });
    expect((await approve(code.userCode, other.token)).status).toBe(200);
    const done = await poll(code.deviceCode);
    expect(done.status).toBe(200);
    expect(done.body.org).toEqual({ id: other.id, name: 'Other Org' });
    const tokens = await tp.request('GET', '/v1/tokens', { token: done.body.token });
    expect(tokens.status).toBe(200);
    expect(tokens.body.every((k: { orgId: string }) => k.orgId === other.id)).toBe(true);
  });

  it('never hands out a key that outlasts the expiring key that approved it', async () => {
    const short = await tp.request('POST', '/v1/tokens', {
      token: org.token,
      body: { name: 'short-lived approver', ttlSeconds: 120 },
    });
    const code = await newCode({ client: 'x' });
    expect((await approve(code.userCode, short.body.token)).status).toBe(200);
    const done = await poll(code.deviceCode);
    expect(done.status).toBe(200);
    const keys = (await tp.request('GET', '/v1/tokens', { token: org.token })).body;
    const minted = keys.find((k: { prefix: string }) => done.body.token.startsWith(k.prefix));
    expect(minted.expiresAt).toBe(short.body.expiresAt);
  });

  it('answers 403 access-denied when the person declines', async () => {
    const code = await newCode({ client: 'pier-cli' });
    const no = await approve(code.userCode, org.token, false);
    expect(no.status).toBe(200);
    expect(no.body).toEqual({ ok: true, approved: false });
    const denied = await poll(code.deviceCode);
    expect(denied.status).toBe(403);
    expect(denied.body.code).toBe('access-denied');
    // Declining is final: the code cannot be approved afterwards.
    const late = await approve(code.userCode, org.token);
    expect(late.status).toBe(404);
    advance(code.interval);
    const still = await poll(code.deviceCode);
    expect(still.status).toBe(403);
    expect(still.body.code).toBe('access-denied');
  });

  it('answers 410 expired-token after the code lifetime, and the code can no longer be approved', async () => {
    const code = await newCode({ client: 'slow' });
    advance(code.expiresIn + 1);
    const lookup = await tp.request('POST', '/v1/device/lookup', {
      token: org.token,
      body: { userCode: code.userCode },
    });
    expect(lookup.status).toBe(404);
    expect(lookup.body.code).toBe('not-found');
    const late = await approve(code.userCode, org.token);
    expect(late.status).toBe(404);
    const expired = await poll(code.deviceCode);
    expect(expired.status).toBe(410);
    expect(expired.body.code).toBe('expired-token');
  });

  it('answers 410 expired-token for a code approved in time but redeemed too late', async () => {
    const code = await newCode();
    expect((await approve(code.userCode, org.token)).status).toBe(200);
    advance(code.expiresIn + 1);
    const expired = await poll(code.deviceCode);
    expect(expired.status).toBe(410);
    expect(expired.body.code).toBe('expired-token');
  });

  it('answers 404 for an unknown user code or device code', async () => {
    const lookup = await tp.request('POST', '/v1/device/lookup', {
      token: org.token,
      body: { userCode: 'BBBB-CCCC' },
    });
    expect(lookup.status).toBe(404);
    expect(lookup.body.code).toBe('not-found');
    const ok = await approve('BBBB-CCCC', org.token);
    expect(ok.status).toBe(404);
    expect(ok.body.code).toBe('not-found');
    const token = await poll('pierd_unknown');
    expect(token.status).toBe(404);
    expect(token.body.code).toBe('not-found');
  });
});

describe('device login: who may approve', () => {
  it('refuses an agent token on lookup and approve with 403 agent-token-credential', async () => {
    const created = await tp.request('POST', '/v1/tokens', {
      token: org.token,
      body: { name: 'agent', agent: { class: 'sandbox' } },
    });
    expect(created.status).toBe(201);
    const agent = created.body.token as string;
    const code = await newCode();
    const ok = await approve(code.userCode, agent);
    expect(ok.status).toBe(403);
    expect(ok.body.code).toBe('agent-token-credential');
    const lookup = await tp.request('POST', '/v1/device/lookup', {
      token: agent,
      body: { userCode: code.userCode },
    });
    expect(lookup.status).toBe(403);
    expect(lookup.body.code).toBe('agent-token-credential');
    // Still pending: the refusal did not approve anything.
    const pending = await poll(code.deviceCode);
    expect(pending.status).toBe(400);
    expect(pending.body.code).toBe('authorization-pending');
  });

  it('refuses a scoped key with 403 token-scope and no key with 401', async () => {
    const created = await tp.request('POST', '/v1/tokens', {
      token: org.token,
      body: { name: 'reader', scopes: ['read'] },
    });
    const code = await newCode();
    const scoped = await approve(code.userCode, created.body.token);
    expect(scoped.status).toBe(403);
    expect(scoped.body.code).toBe('token-scope');
    const anonymous = await tp.request('POST', '/v1/device/approve', {
      body: { userCode: code.userCode },
    });
    expect(anonymous.status).toBe(401);
    expect(anonymous.body.code).toBe('unauthenticated');
    const lookup = await tp.request('POST', '/v1/device/lookup', {
      body: { userCode: code.userCode },
    });
    expect(lookup.status).toBe(401);
  });
});

describe('device login: body bounds', () => {
  const paths = (body: { issues: { path: string }[] }) => body.issues.map((i) => i.path).sort();

  it('bounds client (1–120) and version (1–40) of a code request', async () => {
    const res = await tp.request('POST', '/v1/device/code', {
      body: { client: 'c'.repeat(121), version: 'v'.repeat(41) },
    });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('bad-request');
    expect(paths(res.body)).toEqual(['client', 'version']);
    expect(res.body.error).toContain('client');
    expect(res.body.error).toContain('version');

    const empty = await tp.request('POST', '/v1/device/code', { body: { client: '' } });
    expect(empty.status).toBe(400);
    expect(paths(empty.body)).toEqual(['client']);

    const unknown = await tp.request('POST', '/v1/device/code', { body: { scope: 'all' } });
    expect(unknown.status).toBe(400);
    expect(unknown.body.code).toBe('bad-request');

    const max = await tp.request('POST', '/v1/device/code', {
      body: { client: 'c'.repeat(120), version: 'v'.repeat(40) },
    });
    expect(max.status).toBe(201);
  });

  it('bounds deviceCode (1–200) of a poll', async () => {
    const long = await tp.request('POST', '/v1/device/token', {
      body: { deviceCode: 'd'.repeat(201) },
    });
    expect(long.status).toBe(400);
    expect(long.body.code).toBe('bad-request');
    expect(paths(long.body)).toEqual(['deviceCode']);
    const missing = await tp.request('POST', '/v1/device/token', { body: {} });
    expect(missing.status).toBe(400);
    expect(paths(missing.body)).toEqual(['deviceCode']);
    const wrongType = await tp.request('POST', '/v1/device/token', { body: { deviceCode: 5 } });
    expect(wrongType.status).toBe(400);
  });

  it('bounds userCode (1–40) of lookup and approve, and approve must be a boolean', async () => {
    for (const route of ['/v1/device/lookup', '/v1/device/approve']) {
      const long = await tp.request('POST', route, {
        token: org.token,
        body: { userCode: 'U'.repeat(41) },
      });
      expect(long.status).toBe(400);
      expect(long.body.code).toBe('bad-request');
      expect(paths(long.body)).toEqual(['userCode']);
      const empty = await tp.request('POST', route, { token: org.token, body: { userCode: '' } });
      expect(empty.status).toBe(400);
      expect(paths(empty.body)).toEqual(['userCode']);
    }
    const both = await tp.request('POST', '/v1/device/approve', {
      token: org.token,
      body: { userCode: '', approve: 'yes' },
    });
    expect(both.status).toBe(400);
    expect(paths(both.body)).toEqual(['approve', 'userCode']);
  });

  it('refuses a body that is not JSON', async () => {
    const res = await tp.request('POST', '/v1/device/token', { raw: '{"deviceCode":' });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('bad-request');
  });
});

describe('device login: per-address rate limit of /v1/device/code', () => {
  let fresh: TestPlatform;
  beforeAll(async () => {
    // A platform of its own: the other tests in this file spend codes from the same address.
    fresh = await startTestPlatform();
  });
  afterAll(async () => fresh?.close());

  it('allows 30 codes a minute from one address, then 429 with Retry-After', async () => {
    for (let i = 0; i < 30; i++) {
      const res = await fresh.request('POST', '/v1/device/code', { body: {} });
      expect(res.status).toBe(201);
    }
    const over = await fresh.request('POST', '/v1/device/code', { body: {} });
    expect(over.status).toBe(429);
    expect(over.body.code).toBe('rate-limited');
    const retryAfter = Number(over.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    // Polling is a separate entrance and still answers.
    const pollRes = await fresh.request('POST', '/v1/device/token', {
      body: { deviceCode: 'pierd_x' },
    });
    expect(pollRes.status).toBe(404);
  });
});
