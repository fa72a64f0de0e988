import { describe, expect, it } from 'vitest';
import { parseUpdates, planPush, previewNameOf, ZERO_ID } from './plan.js';
import { parseGitCommand } from './ssh-push.js';

const A = 'a'.repeat(40);
const B = 'b'.repeat(40);

describe('planPush', () => {
  it('deploys main or master, previews other branches, keeps tags; one branch a push', () => {
    const u = (ref: string, neu = B, old = A) => ({ old, new: neu, ref });
    expect(planPush([u('refs/heads/main')])).toMatchObject({ kind: 'deploy', branch: 'main' });
    expect(planPush([u('refs/heads/master')])).toMatchObject({ kind: 'deploy', branch: 'master' });
    expect(planPush([u('refs/tags/v1'), u('refs/heads/main')])).toMatchObject({
      kind: 'deploy',
      tags: [{ ref: 'refs/tags/v1' }],
    });
    expect(planPush([u('refs/tags/v1')])).toMatchObject({ kind: 'keep' });
    expect(planPush([u('refs/heads/feature/x')])).toMatchObject({
      kind: 'preview',
      branch: 'feature/x',
    });
    expect(planPush([u('refs/heads/feature', ZERO_ID)])).toMatchObject({
      kind: 'unpreview',
      branch: 'feature',
    });
    expect(planPush([u('refs/heads/main'), u('refs/heads/x')]).kind).toBe('refuse');
    expect(planPush([u('refs/heads/main'), u('refs/heads/master')]).kind).toBe('refuse');
    expect(planPush([u('refs/heads/main', ZERO_ID)]).kind).toBe('refuse');
    expect(planPush([u('refs/tags/v1', ZERO_ID)]).kind).toBe('refuse');
    expect(planPush([u('refs/notes/commits')]).kind).toBe('refuse');
  });

  it("names a branch's preview as a DNS label that fits the app name", () => {
    expect(previewNameOf('web', 'Feature/Login_Form')).toBe('feature-login-form');
    expect(previewNameOf('web', '--x--')).toBe('x');
    expect(previewNameOf('web', '___')).toBeUndefined();
    const long = previewNameOf('web', 'a'.repeat(100))!;
    expect(`web--${long}`).toHaveLength(63);
    expect(previewNameOf('web', `${'a'.repeat(57)}-b`)).toBe('a'.repeat(58).slice(0, 57));
  });

  it('reads git pre-receive lines, and nothing else', () => {
    expect(parseUpdates(`${A} ${B} refs/heads/main\n`)).toEqual([
      { old: A, new: B, ref: 'refs/heads/main' },
    ]);
    expect(parseUpdates('')).toEqual([]);
    expect(parseUpdates(`${A} ${B}\n`)).toBeUndefined();
    expect(parseUpdates(`${A} nope refs/heads/main\n`)).toBeUndefined();
    expect(parseUpdates(`${A} ${B} refs/heads/main extra\n`)).toBeUndefined();
  });
});

describe('parseGitCommand', () => {
  it('takes the forms git sends over SSH', () => {
    const push = { service: 'git-receive-pack', app: 'web' };
    expect(parseGitCommand("git-receive-pack '/web.git'")).toEqual(push);
    expect(parseGitCommand("git-receive-pack 'web.git'")).toEqual(push);
    expect(parseGitCommand('git receive-pack /web')).toEqual(push);
    expect(parseGitCommand("git-upload-pack '/web.git'")).toEqual({
      service: 'git-upload-pack',
      app: 'web',
    });
  });

  it('refuses anything else', () => {
    for (const c of [
      "git-receive-pack '/../etc.git'",
      "git-receive-pack '/web.git'; rm -rf /",
      "git-receive-pack '/a/b.git'",
      'git-upload-archive web',
      "git-receive-pack '/Web.git'",
      'sh -c id',
    ]) {
      expect(parseGitCommand(c), c).toBeUndefined();
    }
  });
});
