import { randomBytes } from 'node:crypto';
import { readFile, readdir } from 'node:fs/promises';
import path from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SecretBox, loadMasterKey } from '../../src/crypto/secret-box.js';
import { bindingOf, revealSecrets } from '../../src/services/secrets.js';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';

const logs: string[] = [];
const sink = new Writable({
  write(chunk, _enc, done) {
    logs.push(String(chunk));
    done();
  },
});

let tp: TestPlatform;
let org: TestOrg;
// The embedded store keeps its files in the data dir, so the grep below covers them too.
beforeAll(async () => {
  tp = await startTestPlatform(
    { databaseUrl: undefined, logLevel: 'trace' },
    { logger: pino({ level: 'trace' }, sink) },
  );
  org = await tp.createOrg();
  await tp.request('POST', '/v1/apps', { token: org.token, body: { name: 'vault' } });
}, 120_000);
afterAll(async () => tp?.close());

const put = (body: unknown, app = 'vault') =>
  tp.request('PUT', `/v1/apps/${app}/secrets`, { token: org.token, body });
const list = () => tp.request('GET', '/v1/apps/vault/secrets', { token: org.token });

async function filesUnder(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...(await filesUnder(p)));
    else if (entry.isFile()) out.push(p);
  }
  return out;
}

describe('secrets', () => {
  it('stores values encrypted and never returns them', async () => {
    const value = `very-secret-${randomBytes(12).toString('hex')}`;
    const res = await put({ secrets: { DATABASE_PASSWORD: value, OTHER: 'x' } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      appName: 'vault',
      staged: true,
      changed: ['DATABASE_PASSWORD', 'OTHER'],
      restarted: [],
    });
    const listed = await list();
    expect(listed.body).toEqual([
      { name: 'DATABASE_PASSWORD', updatedAt: expect.any(String), managed: false },
      { name: 'OTHER', updatedAt: expect.any(String), managed: false },
    ]);
    expect(JSON.stringify(res.body) + JSON.stringify(listed.body)).not.toContain(value);

    // At rest: AES-256-GCM under the master key, bound to the app and name.
    const { rows } = await tp.platform.store.pool.query(
      `SELECT s.app_id, s.nonce, s.ciphertext FROM secrets s JOIN apps a ON a.id = s.app_id
       WHERE a.name = 'vault' AND s.name = 'DATABASE_PASSWORD'`,
    );
    const row = rows[0];
    expect(row.ciphertext.toString('latin1')).not.toContain(value);
    const box = new SecretBox(await loadMasterKey(tp.dataDir));
    expect(box.open(row, bindingOf(row.app_id, 'DATABASE_PASSWORD'))).toBe(value);
    expect(() => box.open(row, bindingOf(row.app_id, 'OTHER'))).toThrow();
    expect(
      (await revealSecrets(tp.platform.store.db, tp.platform.ctx, row.app_id)).DATABASE_PASSWORD,
    ).toBe(value);

    // Nowhere in logs, nor in any file of the data dir (the store's files and WAL included).
    await tp.platform.store.pool.query('CHECKPOINT');
    expect(logs.join('')).not.toContain(value);
    const needle = Buffer.from(value);
    const files = await filesUnder(tp.dataDir);
    expect(files.length).toBeGreaterThan(100);
    for (const f of files) {
      const data = await readFile(f).catch(() => Buffer.alloc(0));
      expect(data.includes(needle), f).toBe(false);
    }
  });

  it('updates values and build flags', async () => {
    const first = (await list()).body.find((s: { name: string }) => s.name === 'OTHER').updatedAt;
    const res = await put({
      secrets: { OTHER: 'y' },
      build: { OTHER: true, DATABASE_PASSWORD: false },
      staged: false,
    });
    expect(res.status).toBe(200);
    expect(res.body.staged).toBe(false);
    const after = (await list()).body;
    expect(after.find((s: { name: string }) => s.name === 'OTHER')).toMatchObject({ build: true });
    expect(after.find((s: { name: string }) => s.name === 'DATABASE_PASSWORD')).toMatchObject({
      build: false,
    });
    expect(after.find((s: { name: string }) => s.name === 'OTHER').updatedAt >= first).toBe(true);
  });

  it('refuses the reserved prefix and bad names, writing nothing', async () => {
    const res = await put({
      secrets: { PIER_TOKEN: 'a', pier_lower: 'b', '1BAD': 'c', 'WITH-DASH': 'd', FINE: 'e' },
    });
    expect(res.status).toBe(400);
    const paths = res.body.issues.map((i: { path: string }) => i.path);
    expect(paths).toEqual([
      'secrets.PIER_TOKEN',
      'secrets.pier_lower',
      'secrets.1BAD',
      'secrets.WITH-DASH',
    ]);
    expect(res.body.error).toContain('PIER_');
    expect((await list()).body.map((s: { name: string }) => s.name)).not.toContain('FINE');
    const build = await put({ build: { NOPE: true } });
    expect(build.status).toBe(400);
    expect(build.body.issues[0].path).toBe('build.NOPE');
    expect((await put({ secrets: { BIG: 'x'.repeat(64 * 1024 + 1) } })).status).toBe(400);
    expect((await put({ secrets: { N: 5 } })).status).toBe(400);
  });

  it('deletes a secret, and 404s a missing one or a missing app', async () => {
    await put({ secrets: { TEMP: 't' } });
    expect(
      (await tp.request('DELETE', '/v1/apps/vault/secrets/TEMP', { token: org.token })).status,
    ).toBe(204);
    expect(
      (await tp.request('DELETE', '/v1/apps/vault/secrets/TEMP', { token: org.token })).status,
    ).toBe(404);
    expect((await put({ secrets: { A: 'b' } }, 'no-such-app')).status).toBe(404);
  });

  it('refuses to change or delete a managed secret', async () => {
    const { rows } = await tp.platform.store.pool.query(`SELECT id FROM apps WHERE name = 'vault'`);
    const appId = rows[0].id as string;
    const sealed = tp.platform.ctx.box.seal('postgres://x', bindingOf(appId, 'DATABASE_URL'));
    await tp.platform.store.pool.query(
      `INSERT INTO secrets (app_id, name, nonce, ciphertext, managed_reason) VALUES ($1, 'DATABASE_URL', $2, $3, 'attachment')`,
      [appId, sealed.nonce, sealed.ciphertext],
    );
    const listed = (await list()).body.find((s: { name: string }) => s.name === 'DATABASE_URL');
    expect(listed).toMatchObject({ managed: true, managedReason: 'attachment' });
    const change = await put({ secrets: { DATABASE_URL: 'postgres://evil', OK: '1' } });
    expect(change.status).toBe(409);
    expect(change.body.code).toBe('secret-managed');
    expect((await list()).body.map((s: { name: string }) => s.name)).not.toContain('OK');
    const del = await tp.request('DELETE', '/v1/apps/vault/secrets/DATABASE_URL', {
      token: org.token,
    });
    expect(del.status).toBe(409);
    expect(del.body.code).toBe('secret-managed');
  });
});
