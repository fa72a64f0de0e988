import { describe, expect, it } from 'vitest';
import {
  DEFAULT_PUSH_SETTINGS,
  parseUpdates,
  planPush as planWith,
  previewNameOf,
  productionBranchesOf,
  ZERO_ID,
  type RefUpdate,
} from './plan.js';
import { parseGitCommand } from './ssh-push.js';

const A = 'a'.repeat(40);
const B = 'b'.repeat(40);
const u = (ref: string, neu = B, old = A) => ({ old, new: neu, ref });
/** The plan of an app that never changed its settings. */
const planPush = (updates: RefUpdate[]) => planWith(updates, DEFAULT_PUSH_SETTINGS);

describe('planPush', () => {
  it('deploys main or master, previews other branches, keeps tags; one branch a push', () => {
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

  it('deploys only the production branch set; main and master are then branches like any', () => {
    const trunk = { productionBranch: 'trunk', branchPreviews: true };
    expect(productionBranchesOf(trunk)).toEqual(['trunk']);
    expect(productionBranchesOf(DEFAULT_PUSH_SETTINGS)).toEqual(['main', 'master']);
    expect(planWith([u('refs/heads/trunk')], trunk)).toMatchObject({
      kind: 'deploy',
      branch: 'trunk',
    });
    expect(planWith([u('refs/heads/main')], trunk)).toMatchObject({
      kind: 'preview',
      branch: 'main',
    });
    expect(planWith([u('refs/heads/master')], trunk).kind).toBe('preview');
    // Deleting the production branch is refused; main, now an ordinary branch, may go.
    const gone = planWith([u('refs/heads/trunk', ZERO_ID)], trunk);
    expect(gone).toMatchObject({
      kind: 'refuse',
      reason: expect.stringMatching(/^deleting refs\/heads\/trunk is refused/),
    });
    expect(planWith([u('refs/heads/main', ZERO_ID)], trunk)).toMatchObject({
      kind: 'unpreview',
      branch: 'main',
    });
    // A branch called like the default's is not production for an app that set another.
    expect(planWith([u('refs/heads/trunk')], DEFAULT_PUSH_SETTINGS).kind).toBe('preview');
  });

  it('with branch previews off, stores other branches and deploys nothing for them', () => {
    const off = { productionBranch: null, branchPreviews: false };
    expect(planWith([u('refs/heads/feature')], off)).toMatchObject({
      kind: 'store',
      branch: 'feature',
      update: { ref: 'refs/heads/feature', new: B },
    });
    // A name that makes no preview name is stored as well: no preview is asked for.
    expect(planWith([u('refs/heads/___')], off).kind).toBe('store');
    expect(planWith([u('refs/heads/main')], off).kind).toBe('deploy');
    expect(planWith([u('refs/tags/v1'), u('refs/heads/x')], off)).toMatchObject({
      kind: 'store',
      tags: [{ ref: 'refs/tags/v1' }],
    });
    // Deleting a branch still removes a preview it made while previews were on.
    expect(planWith([u('refs/heads/feature', ZERO_ID)], off).kind).toBe('unpreview');
    expect(planWith([u('refs/heads/main', ZERO_ID)], off).kind).toBe('refuse');
    expect(planWith([u('refs/heads/a'), u('refs/heads/b')], off).kind).toBe('refuse');
    const trunkOnly = { productionBranch: 'trunk', branchPreviews: false };
    expect(planWith([u('refs/heads/main')], trunkOnly).kind).toBe('store');
    expect(planWith([u('refs/heads/trunk')], trunkOnly).kind).toBe('deploy');
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
