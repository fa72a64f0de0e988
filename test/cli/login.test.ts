import { execFile } from 'node:child_process';
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';
import { type CliResult, ENTRY, cleanEnv, runCli, tempDir } from './run-cli.js';

let tp: TestPlatform;
let org: TestOrg;
let tmp: Awaited<ReturnType<typeof tempDir>>;

beforeAll(async () => {
  tp = await startTestPlatform();
  org = await tp.createOrg({ name: 'Login Test Org' });
  tmp = await tempDir();
});
afterAll(async () => {
  await tp?.close();
  await tmp?.remove();
});

/**
 * Starts `pier login` and answers its user code as soon as it is printed, plus a promise
 * of the whole run. The poll interval is shortened to 200 ms, so the client also meets
 * the server's 429 `rate-limited` and has to honour Retry-After.
 */
function startLogin(config: string): { userCode: Promise<string>; done: Promise<CliResult> } {
  let stdout = '';
  let stderr = '';
  let onCode: (code: string) => void = () => {};
  const userCode = new Promise<string>((resolve) => (onCode = resolve));
  const done = new Promise<CliResult>((resolve) => {
    const child = execFile(
      process.execPath,
      [...ENTRY, 'login', '--api-url', tp.url],
      { env: cleanEnv({ PIER_CONFIG: config, PIER_LOGIN_POLL_MS: '200' }), timeout: 28_000 },
      (err) =>
        resolve({
          code: err ? (typeof err.code === 'number' ? err.code : null) : 0,
          stdout,
          stderr,
        }),
    );
    child.stdin?.end();
    child.stdout?.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      const m = /code ([A-Z]{4}-[A-Z]{4})\b/.exec(stdout);
      if (m) onCode(m[1]!);
    });
    child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  });
  return {
    userCode: Promise.race([
      userCode,
      done.then((r) => Promise.reject(new Error(`login ended early: ${r.stderr}`))),
    ]),
    done,
  };
}

describe('pier login', () => {
  const config = () => path.join(tmp.dir, 'nested', 'pier', 'config.json');

  it('signs in through the device flow and saves a working key (0600 file, 0700 dir)', async () => {
    const login = startLogin(config());
    const userCode = await login.userCode;
    // Approve only after a few 200 ms polls: the first is pending, the next too early, so
    // the server answers 429 with Retry-After and the client must wait it out (~5 s).
    const started = Date.now();
    await sleep(1000);
    const approve = await tp.request('POST', '/v1/device/approve', {
      token: org.token,
      body: { userCode },
    });
    expect(approve.status).toBe(200);

    const res = await login.done;
    expect(res.stderr).toBe('');
    expect(res.code).toBe(0);
    expect(Date.now() - started).toBeGreaterThan(3500);
    expect(res.stdout).toContain(`/console/device?userCode=${userCode}`);
    expect(res.stdout).toContain(`Logged in to Login Test Org (${org.id})`);

    expect((await stat(config())).mode & 0o777).toBe(0o600);
    expect((await stat(path.dirname(config()))).mode & 0o777).toBe(0o700);
    const saved = JSON.parse(await readFile(config(), 'utf8')) as {
      apiUrl: string;
      apiKey: string;
    };
    expect(saved.apiUrl).toBe(tp.url);
    expect(saved.apiKey).toMatch(/^pier_/);

    const tokens = await tp.request('GET', '/v1/tokens', { token: saved.apiKey });
    expect(tokens.status).toBe(200);
    expect(tokens.body.map((t: { name: string }) => t.name)).toContain('pier CLI (pier-cli 0.1.0)');

    // Later commands need neither flags nor environment: the saved address and key do.
    const list = await runCli(['tokens', 'list', '--json'], { env: { PIER_CONFIG: config() } });
    expect(list.code).toBe(0);
    expect(JSON.parse(list.stdout)).toHaveLength(tokens.body.length);
  }, 30_000);

  it('keeps the saved key away from another address', async () => {
    const res = await runCli(['apps', 'list', '--api-url', 'http://127.0.0.1:59999'], {
      env: { PIER_CONFIG: config() },
    });
    expect(res.code).toBe(1);
    expect(res.stderr).toBe(
      'pier: no API key for http://127.0.0.1:59999; run `pier login` or set PIER_API_KEY\n',
    );
  });

  it('stops with a clear message when the login is declined', async () => {
    const other = path.join(tmp.dir, 'declined.json');
    const login = startLogin(other);
    const userCode = await login.userCode;
    const decline = await tp.request('POST', '/v1/device/approve', {
      token: org.token,
      body: { userCode, approve: false },
    });
    expect(decline.body).toEqual({ ok: true, approved: false });
    const res = await login.done;
    expect(res.code).toBe(1);
    expect(res.stderr).toBe('pier: the login was declined in the console\n');
    await expect(stat(other)).rejects.toThrow(/ENOENT/);
  }, 30_000);
});
