/** `pier protect` against a real server: modes, a generated password, links, tokens. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestPlatform } from '../helpers/platform.js';
import { pierWith, startCliBed, type CliBed } from '../cli/run-cli.js';

let tp: TestPlatform;
let tmp: CliBed['tmp'];
let env: Record<string, string>;
const pier = pierWith(() => env);

beforeAll(async () => {
  ({ tp, tmp, env } = await startCliBed());
  expect((await pier(['apps', 'create', 'cli-guarded'])).code).toBe(0);
});
afterAll(async () => {
  await tp?.close();
  await tmp?.remove();
});

describe('pier protect', () => {
  it('sets modes, shows a generated password once, mints links and tokens', async () => {
    const shown = await pier(['protect', 'show', 'cli-guarded']);
    expect(shown.stdout).toMatch(/^Mode:\s+public$/m);

    const pw = await pier(['protect', 'password', 'cli-guarded']);
    expect(pw.code, pw.stderr).toBe(0);
    expect(pw.stdout).toMatch(/^Password:\s+[A-Za-z0-9]{24}$/m);
    const chosen = await pier(['protect', 'password', 'cli-guarded', '--password-stdin'], {
      input: 'from stdin please\n',
    });
    expect(chosen.stdout).toMatch(/^Password:\s+\(set; shown only once\)$/m);

    const notSigned = await pier(['protect', 'token', 'cli-guarded']);
    expect(notSigned.code).not.toBe(0);
    expect(notSigned.stderr).toMatch(/signed/);

    expect((await pier(['protect', 'signed', 'cli-guarded'])).stdout).toMatch(/^Mode:\s+signed$/m);
    const link = await pier(['protect', 'link', 'cli-guarded', 'reviewers', '--json']);
    const created = JSON.parse(link.stdout) as { id: string; url: string };
    expect(created.url).toContain('pier_access=l1.');
    expect((await pier(['protect', 'show', 'cli-guarded'])).stdout).toContain(created.id);
    const token = await pier(['protect', 'token', 'cli-guarded', '--ttl', '60', '--next', '/x']);
    expect(token.stdout).toMatch(/^Header:\s+Pier-Access-Token$/m);
    expect(token.stdout).toMatch(/^URL:\s+http:\/\/cli-guarded\.\S+\/x\?pier_access=t1\./m);
    expect((await pier(['protect', 'unlink', 'cli-guarded', created.id])).code).toBe(0);
    expect((await pier(['protect', 'rotate', 'cli-guarded'])).code).toBe(0);
    const pub = await pier(['protect', 'public', 'cli-guarded', '--json']);
    expect(JSON.parse(pub.stdout)).toMatchObject({ mode: 'public', links: [] });
  }, 120_000);
});
