import { execFileSync } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SSH_KEY_LIMIT } from '../../src/services/ssh.js';
import { openSshPublicKeyFromEd25519 } from '../../src/ssh/host-key.js';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';

interface GeneratedKey {
  publicKey: string;
  fingerprint: string;
  bits: number;
}

let tp: TestPlatform;
let org: TestOrg;
let keyDir: string;
let keyCounter = 0;

/** A real key from ssh-keygen, with the fingerprint and size `ssh-keygen -lf` reports. */
function sshKeygen(type: string, bits?: number, comment = `test-${type}`): GeneratedKey {
  const file = path.join(keyDir, `key${++keyCounter}`);
  const args = ['-q', '-t', type, '-N', '', '-C', comment, '-f', file];
  if (bits !== undefined) args.push('-b', String(bits));
  execFileSync('ssh-keygen', args, { stdio: 'pipe' });
  const publicKey = readFileSync(`${file}.pub`, 'utf8').trim();
  // `2048 SHA256:abc... comment (RSA)`
  const listed = execFileSync('ssh-keygen', ['-l', '-E', 'sha256', '-f', `${file}.pub`], {
    encoding: 'utf8',
  }).trim();
  const [size, fingerprint] = listed.split(/\s+/);
  return { publicKey, fingerprint: fingerprint ?? '', bits: Number(size) };
}

/** A fresh ed25519 key line, built without a child process (fast). */
function ed25519Line(comment?: string): string {
  const { publicKey } = generateKeyPairSync('ed25519');
  const { x } = publicKey.export({ format: 'jwk' });
  return openSshPublicKeyFromEd25519(Buffer.from(x ?? '', 'base64url'), comment);
}

async function newToken(
  owner: TestOrg,
  body: Record<string, unknown>,
): Promise<{ token: string; id: string }> {
  const res = await tp.request('POST', '/v1/tokens', { token: owner.token, body });
  expect(res.status).toBe(201);
  return { token: res.body.token, id: res.body.id };
}

beforeAll(async () => {
  keyDir = mkdtempSync(path.join(os.tmpdir(), 'pier-ssh-test-'));
  tp = await startTestPlatform();
  org = await tp.createOrg();
});

afterAll(async () => {
  await tp?.close();
  if (keyDir) rmSync(keyDir, { recursive: true, force: true });
});

describe('SSH public keys', () => {
  it.each([
    { type: 'ed25519', bits: undefined, sshType: 'ssh-ed25519', size: 256 },
    { type: 'ecdsa', bits: 256, sshType: 'ecdsa-sha2-nistp256', size: 256 },
    { type: 'rsa', bits: 2048, sshType: 'ssh-rsa', size: 2048 },
  ])('accepts a real $sshType key made by ssh-keygen', async ({ type, bits, sshType, size }) => {
    const key = sshKeygen(type, bits);
    expect(key.bits).toBe(size);
    const res = await tp.request('POST', '/v1/ssh-keys', {
      token: org.token,
      body: { publicKey: key.publicKey, name: `my ${type} key` },
    });
    expect(res.status).toBe(201);
    expect(res.body.id).toEqual(expect.any(String));
    expect(res.body.name).toBe(`my ${type} key`);
    expect(res.body.type).toBe(sshType);
    expect(res.body.bits).toBe(size);
    expect(res.body.fingerprint).toMatch(/^SHA256:[A-Za-z0-9+/]{43}$/);
    expect(res.body.fingerprint).toBe(key.fingerprint);
    expect(res.body.publicKey).toBe(key.publicKey);
    expect(res.body.userId).toBe(org.userId);
    expect(new Date(res.body.createdAt).getTime()).not.toBeNaN();
  });

  it('names a key after its comment when no name is given', async () => {
    const key = sshKeygen('ed25519', undefined, 'alice@laptop');
    const res = await tp.request('POST', '/v1/ssh-keys', {
      token: org.token,
      body: { publicKey: key.publicKey },
    });
    expect(res.status).toBe(201);
    expect(res.body.name).toBe('alice@laptop');
  });

  it('refuses an RSA key of 1024 bits with 400 invalid-key', async () => {
    const key = sshKeygen('rsa', 1024);
    const res = await tp.request('POST', '/v1/ssh-keys', {
      token: org.token,
      body: { publicKey: key.publicKey },
    });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('invalid-key');
    expect(res.body.error).toMatch(/2048/);
  });

  it.each([
    ['plain garbage', 'this is not a key'],
    ['a bad base64 blob', 'ssh-ed25519 AAAA!!!notbase64'],
    ['a type that does not match the blob', ed25519Line().replace('ssh-ed25519', 'ssh-rsa')],
    ['a truncated blob', 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA=='],
  ])('refuses %s with 400 invalid-key', async (_what, publicKey) => {
    const res = await tp.request('POST', '/v1/ssh-keys', { token: org.token, body: { publicKey } });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('invalid-key');
    expect(typeof res.body.error).toBe('string');
  });

  it('refuses the same key twice with 409 duplicate, even under another name', async () => {
    const key = sshKeygen('ed25519');
    const first = await tp.request('POST', '/v1/ssh-keys', {
      token: org.token,
      body: { publicKey: key.publicKey, name: 'first' },
    });
    expect(first.status).toBe(201);
    const again = await tp.request('POST', '/v1/ssh-keys', {
      token: org.token,
      body: { publicKey: key.publicKey, name: 'second' },
    });
    expect(again.status).toBe(409);
    expect(again.body.code).toBe('duplicate');
    // Same key with a different comment: still the same key.
    const other = key.publicKey.replace(/ \S+$/, ' renamed@host');
    const third = await tp.request('POST', '/v1/ssh-keys', {
      token: org.token,
      body: { publicKey: other },
    });
    expect(third.status).toBe(409);
    expect(third.body.code).toBe('duplicate');
  });

  it('lets exactly one of two simultaneous adds of the same key through', async () => {
    const line = ed25519Line();
    const answers = await Promise.all(
      [0, 1, 2].map(() =>
        tp.request('POST', '/v1/ssh-keys', { token: org.token, body: { publicKey: line } }),
      ),
    );
    expect(answers.map((a) => a.status).sort()).toEqual([201, 409, 409]);
    for (const a of answers.filter((x) => x.status === 409)) {
      expect(a.body.code).toBe('duplicate');
    }
  });

  // Spec 1.1: another organization's objects answer as missing ones, so a key present
  // elsewhere is no duplicate here (and a 409 would leak that it exists).
  it('lets two organizations hold the same key', async () => {
    const line = ed25519Line();
    const other = await tp.createOrg();
    const mine = await tp.request('POST', '/v1/ssh-keys', {
      token: org.token,
      body: { publicKey: line },
    });
    const theirs = await tp.request('POST', '/v1/ssh-keys', {
      token: other.token,
      body: { publicKey: line },
    });
    expect(mine.status).toBe(201);
    expect(theirs.status).toBe(201);
    expect(theirs.body.id).not.toBe(mine.body.id);
  });

  it('lists the keys of the organization only', async () => {
    const mine = await tp.request('POST', '/v1/ssh-keys', {
      token: org.token,
      body: { publicKey: ed25519Line(), name: 'listed' },
    });
    expect(mine.status).toBe(201);
    const other = await tp.createOrg();
    const theirs = await tp.request('POST', '/v1/ssh-keys', {
      token: other.token,
      body: { publicKey: ed25519Line(), name: 'theirs' },
    });
    expect(theirs.status).toBe(201);

    const list = await tp.request('GET', '/v1/ssh-keys', { token: org.token });
    expect(list.status).toBe(200);
    expect(Array.isArray(list.body)).toBe(true);
    const ids = list.body.map((k: { id: string }) => k.id);
    expect(ids).toContain(mine.body.id);
    expect(ids).not.toContain(theirs.body.id);
    expect(list.body.find((k: { id: string }) => k.id === mine.body.id)).toEqual(mine.body);

    const otherList = await tp.request('GET', '/v1/ssh-keys', { token: other.token });
    expect(otherList.body.map((k: { id: string }) => k.id)).toEqual([theirs.body.id]);
  });

  it('deletes a key (204), then 404 on a second delete; the key can be added again', async () => {
    const line = ed25519Line();
    const added = await tp.request('POST', '/v1/ssh-keys', {
      token: org.token,
      body: { publicKey: line },
    });
    expect(added.status).toBe(201);
    const del = await tp.request('DELETE', `/v1/ssh-keys/${added.body.id}`, { token: org.token });
    expect(del.status).toBe(204);
    expect(del.body).toBeUndefined();
    const list = await tp.request('GET', '/v1/ssh-keys', { token: org.token });
    expect(list.body.map((k: { id: string }) => k.id)).not.toContain(added.body.id);
    const again = await tp.request('DELETE', `/v1/ssh-keys/${added.body.id}`, {
      token: org.token,
    });
    expect(again.status).toBe(404);
    expect(again.body.code).toBe('not-found');
    const readd = await tp.request('POST', '/v1/ssh-keys', {
      token: org.token,
      body: { publicKey: line },
    });
    expect(readd.status).toBe(201);
  });

  it("answers 404 when deleting another organization's key, and keeps it", async () => {
    const other = await tp.createOrg();
    const theirs = await tp.request('POST', '/v1/ssh-keys', {
      token: other.token,
      body: { publicKey: ed25519Line() },
    });
    expect(theirs.status).toBe(201);
    const del = await tp.request('DELETE', `/v1/ssh-keys/${theirs.body.id}`, { token: org.token });
    expect(del.status).toBe(404);
    expect(del.body.code).toBe('not-found');
    const list = await tp.request('GET', '/v1/ssh-keys', { token: other.token });
    expect(list.body.map((k: { id: string }) => k.id)).toContain(theirs.body.id);
  });

  it(`stops at ${SSH_KEY_LIMIT} keys per organization with 409 limit`, async () => {
    expect(SSH_KEY_LIMIT).toBe(100);
    const full = await tp.createOrg();
    for (let i = 0; i < SSH_KEY_LIMIT; i += 10) {
      const batch = Array.from({ length: Math.min(10, SSH_KEY_LIMIT - i) }, () =>
        tp.request('POST', '/v1/ssh-keys', {
          token: full.token,
          body: { publicKey: ed25519Line() },
        }),
      );
      for (const res of await Promise.all(batch)) expect(res.status).toBe(201);
    }
    const list = await tp.request('GET', '/v1/ssh-keys', { token: full.token });
    expect(list.body).toHaveLength(SSH_KEY_LIMIT);

    const over = await tp.request('POST', '/v1/ssh-keys', {
      token: full.token,
      body: { publicKey: ed25519Line() },
    });
    expect(over.status).toBe(409);
    expect(over.body.code).toBe('limit');
    expect(over.body.limit).toBe(SSH_KEY_LIMIT);
    expect(over.body.current).toBe(SSH_KEY_LIMIT);

    // Removing one makes room for exactly one more.
    const del = await tp.request('DELETE', `/v1/ssh-keys/${list.body[0].id}`, {
      token: full.token,
    });
    expect(del.status).toBe(204);
    const fits = await tp.request('POST', '/v1/ssh-keys', {
      token: full.token,
      body: { publicKey: ed25519Line() },
    });
    expect(fits.status).toBe(201);
  });

  it('bounds the body: publicKey ≤ 16384, name 1–100, no unknown fields', async () => {
    const long = await tp.request('POST', '/v1/ssh-keys', {
      token: org.token,
      body: { publicKey: 'x'.repeat(16385) },
    });
    expect(long.status).toBe(400);
    expect(long.body.code).toBe('bad-request');
    expect(long.body.issues.map((i: { path: string }) => i.path)).toEqual(['publicKey']);

    const both = await tp.request('POST', '/v1/ssh-keys', {
      token: org.token,
      body: { publicKey: ed25519Line(), name: 'n'.repeat(101) },
    });
    expect(both.status).toBe(400);
    expect(both.body.code).toBe('bad-request');
    expect(both.body.issues.map((i: { path: string }) => i.path)).toEqual(['name']);
    expect(both.body.error).toContain('name');

    const several = await tp.request('POST', '/v1/ssh-keys', {
      token: org.token,
      body: { publicKey: '', name: '' },
    });
    expect(several.status).toBe(400);
    const paths = several.body.issues.map((i: { path: string }) => i.path).sort();
    expect(paths).toEqual(['name', 'publicKey']);

    const missing = await tp.request('POST', '/v1/ssh-keys', { token: org.token, body: {} });
    expect(missing.status).toBe(400);
    expect(missing.body.issues).toEqual([{ path: 'publicKey', message: expect.any(String) }]);

    const name100 = await tp.request('POST', '/v1/ssh-keys', {
      token: org.token,
      body: { publicKey: ed25519Line(), name: 'n'.repeat(100) },
    });
    expect(name100.status).toBe(201);
  });

  it('needs a full-access key, and no agent token may add or delete a key', async () => {
    const read = await newToken(org, { name: 'reader', scopes: ['read'] });
    const list = await tp.request('GET', '/v1/ssh-keys', { token: read.token });
    expect(list.status).toBe(403);
    expect(list.body.code).toBe('token-scope');
    const add = await tp.request('POST', '/v1/ssh-keys', {
      token: read.token,
      body: { publicKey: ed25519Line() },
    });
    expect(add.status).toBe(403);
    expect(add.body.code).toBe('token-scope');

    const agent = await newToken(org, { name: 'agent', agent: { class: 'sandbox' } });
    const agentList = await tp.request('GET', '/v1/ssh-keys', { token: agent.token });
    expect(agentList.status).toBe(200);
    const agentAdd = await tp.request('POST', '/v1/ssh-keys', {
      token: agent.token,
      body: { publicKey: ed25519Line() },
    });
    expect(agentAdd.status).toBe(403);
    expect(agentAdd.body.code).toBe('agent-token-credential');

    const noKey = await tp.request('GET', '/v1/ssh-keys');
    expect(noKey.status).toBe(401);
    expect(noKey.body.code).toBe('unauthenticated');
  });
});

describe('SSH tokens', () => {
  let tokenOrg: TestOrg;
  const appName = 'ssh-target';

  beforeAll(async () => {
    tokenOrg = await tp.createOrg();
    const app = await tp.request('POST', '/v1/apps', {
      token: tokenOrg.token,
      body: { name: appName },
    });
    expect(app.status).toBe(201);
  });

  it('mints a token for an existing app with host, port, host key and command', async () => {
    const gateway = await tp.request('GET', '/v1/ssh', { token: tokenOrg.token });
    const before = Date.now();
    const res = await tp.request('POST', '/v1/ssh/tokens', {
      token: tokenOrg.token,
      body: { app: appName },
    });
    expect(res.status).toBe(201);
    expect(res.body.id).toEqual(expect.any(String));
    expect(res.body.app).toBe(appName);
    expect(res.body.token).toEqual(expect.any(String));
    expect(res.body.token.length).toBeGreaterThanOrEqual(32);
    expect(res.body.token.startsWith(res.body.prefix)).toBe(true);
    expect(res.body.expired).toBe(false);
    // Default lifetime: an hour.
    const ttl = new Date(res.body.expiresAt).getTime() - before;
    expect(ttl).toBeGreaterThan(3590_000);
    expect(ttl).toBeLessThan(3610_000);
    expect(res.body.host).toBe(gateway.body.host);
    expect(res.body.port).toBe(gateway.body.port);
    expect(res.body.hostKey).toBe(gateway.body.hostKey);
    expect(res.body.command).toContain(res.body.token);
    expect(res.body.command).toContain(String(res.body.port));
    expect(res.body.command).toContain(res.body.host);
    expect(res.body.command).toMatch(/^ssh /);
  });

  it('takes a machine and a ttlS', async () => {
    const before = Date.now();
    const res = await tp.request('POST', '/v1/ssh/tokens', {
      token: tokenOrg.token,
      body: { app: appName, machine: 'm-1', ttlS: 60 },
    });
    expect(res.status).toBe(201);
    expect(res.body.machine).toBe('m-1');
    const ttl = new Date(res.body.expiresAt).getTime() - before;
    expect(ttl).toBeGreaterThan(55_000);
    expect(ttl).toBeLessThan(65_000);

    const max = await tp.request('POST', '/v1/ssh/tokens', {
      token: tokenOrg.token,
      body: { app: appName, ttlS: 259_200 },
    });
    expect(max.status).toBe(201);
  });

  it.each([
    [{ ttlS: 59 }, 'ttlS'],
    [{ ttlS: 259_201 }, 'ttlS'],
    [{ ttlS: 90.5 }, 'ttlS'],
    [{ machine: 'm'.repeat(65) }, 'machine'],
    [{ app: 'a'.repeat(64) }, 'app'],
    [{ app: '' }, 'app'],
    [{ extra: true }, 'extra'],
  ])('refuses %j with 400 bad-request naming %s', async (patch, field) => {
    const res = await tp.request('POST', '/v1/ssh/tokens', {
      token: tokenOrg.token,
      body: { app: appName, ...patch },
    });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('bad-request');
    expect(res.body.issues.map((i: { path: string }) => i.path)).toEqual([field]);
  });

  it('refuses a missing app, or one of another organization, with 400', async () => {
    const missing = await tp.request('POST', '/v1/ssh/tokens', {
      token: tokenOrg.token,
      body: { app: 'no-such-app' },
    });
    expect(missing.status).toBe(400);
    expect(missing.body.code).toBe('bad-request');
    expect(missing.body.issues).toEqual([{ path: 'app', message: expect.any(String) }]);

    const other = await tp.createOrg();
    const foreign = await tp.request('POST', '/v1/ssh/tokens', {
      token: other.token,
      body: { app: appName },
    });
    expect(foreign.status).toBe(400);
    expect(foreign.body.code).toBe('bad-request');
  });

  it('lists tokens without their values', async () => {
    const made = await tp.request('POST', '/v1/ssh/tokens', {
      token: tokenOrg.token,
      body: { app: appName },
    });
    expect(made.status).toBe(201);
    const list = await tp.request('GET', '/v1/ssh/tokens', { token: tokenOrg.token });
    expect(list.status).toBe(200);
    const entry = list.body.find((t: { id: string }) => t.id === made.body.id);
    expect(entry).toMatchObject({
      id: made.body.id,
      app: appName,
      prefix: made.body.prefix,
      expiresAt: made.body.expiresAt,
      expired: false,
    });
    expect(entry.token).toBeUndefined();
    expect(JSON.stringify(list.body)).not.toContain(made.body.token);

    const other = await tp.createOrg();
    const otherList = await tp.request('GET', '/v1/ssh/tokens', { token: other.token });
    expect(otherList.status).toBe(200);
    expect(otherList.body).toEqual([]);
  });

  it('revokes a token (204), then 404; another organization gets 404', async () => {
    const made = await tp.request('POST', '/v1/ssh/tokens', {
      token: tokenOrg.token,
      body: { app: appName },
    });
    const other = await tp.createOrg();
    const foreign = await tp.request('DELETE', `/v1/ssh/tokens/${made.body.id}`, {
      token: other.token,
    });
    expect(foreign.status).toBe(404);
    expect(foreign.body.code).toBe('not-found');

    const del = await tp.request('DELETE', `/v1/ssh/tokens/${made.body.id}`, {
      token: tokenOrg.token,
    });
    expect(del.status).toBe(204);
    const list = await tp.request('GET', '/v1/ssh/tokens', { token: tokenOrg.token });
    expect(list.body.map((t: { id: string }) => t.id)).not.toContain(made.body.id);
    const again = await tp.request('DELETE', `/v1/ssh/tokens/${made.body.id}`, {
      token: tokenOrg.token,
    });
    expect(again.status).toBe(404);
    expect(again.body.code).toBe('not-found');
  });

  it('needs a full-access key; agent tokens may list but not mint', async () => {
    const read = await newToken(tokenOrg, { name: 'reader', scopes: ['read'] });
    const mint = await tp.request('POST', '/v1/ssh/tokens', {
      token: read.token,
      body: { app: appName },
    });
    expect(mint.status).toBe(403);
    expect(mint.body.code).toBe('token-scope');
    const list = await tp.request('GET', '/v1/ssh/tokens', { token: read.token });
    expect(list.status).toBe(403);
    expect(list.body.code).toBe('token-scope');

    const agent = await newToken(tokenOrg, { name: 'agent', agent: { class: 'sandbox' } });
    const agentMint = await tp.request('POST', '/v1/ssh/tokens', {
      token: agent.token,
      body: { app: appName },
    });
    expect(agentMint.status).toBe(403);
    expect(agentMint.body.code).toBe('agent-token-credential');
    const agentList = await tp.request('GET', '/v1/ssh/tokens', { token: agent.token });
    expect(agentList.status).toBe(200);
  });
});

describe('GET /v1/ssh (the gateway)', () => {
  it('answers address, host, port, host key and its fingerprint', async () => {
    const res = await tp.request('GET', '/v1/ssh', { token: org.token });
    expect(res.status).toBe(200);
    expect(Object.keys(res.body).sort()).toEqual(
      ['address', 'host', 'hostKey', 'hostKeyFingerprint', 'port'].sort(),
    );
    expect(res.body.address).toBe(`${res.body.host}:${res.body.port}`);
    expect(res.body.host).toBe('127.0.0.1');
    expect(Number.isInteger(res.body.port)).toBe(true);
    expect(res.body.port).toBeGreaterThan(0);
    expect(res.body.port).toBeLessThan(65536);
    expect(res.body.hostKey).toMatch(/^ssh-ed25519 AAAAC3NzaC1lZDI1NTE5[A-Za-z0-9+/=]+( .*)?$/);
    expect(res.body.hostKeyFingerprint).toMatch(/^SHA256:[A-Za-z0-9+/]{43}$/);

    // The host key is a real ed25519 key whose fingerprint is the one answered.
    const file = path.join(keyDir, 'gateway.pub');
    writeFileSync(file, `${res.body.hostKey}\n`);
    const listed = execFileSync('ssh-keygen', ['-l', '-E', 'sha256', '-f', file], {
      encoding: 'utf8',
    });
    expect(listed).toContain(res.body.hostKeyFingerprint);
    expect(listed).toMatch(/\(ED25519\)/);
  });

  it('is the same answer on every call (the host key is pinned)', async () => {
    const a = await tp.request('GET', '/v1/ssh', { token: org.token });
    const b = await tp.request('GET', '/v1/ssh', { token: org.token });
    expect(b.body).toEqual(a.body);
  });

  it('may be read with a read-scoped key and by an agent token of class production', async () => {
    const read = await newToken(org, { name: 'reader', scopes: ['read'] });
    const res = await tp.request('GET', '/v1/ssh', { token: read.token });
    expect(res.status).toBe(200);
    expect(res.body.hostKey).toMatch(/^ssh-ed25519 /);

    const deploy = await newToken(org, { name: 'deployer', scopes: ['deploy'] });
    const refused = await tp.request('GET', '/v1/ssh', { token: deploy.token });
    expect(refused.status).toBe(403);
    expect(refused.body.code).toBe('token-scope');

    const prod = await newToken(org, { name: 'prod agent', agent: { class: 'production' } });
    const agentRead = await tp.request('GET', '/v1/ssh', { token: prod.token });
    expect(agentRead.status).toBe(200);
  });

  it('needs a key', async () => {
    const res = await tp.request('GET', '/v1/ssh');
    expect(res.status).toBe(401);
    expect(res.body.code).toBe('unauthenticated');
  });
});
