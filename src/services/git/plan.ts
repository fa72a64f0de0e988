/**
 * What a push asks for, read from the ref updates git hands the pre-receive hook, and
 * what pier does with it. The production branch, `main` (or `master`, for repositories
 * that still use it), deploys; tags are kept and deploy nothing; any other branch is
 * refused until previews exist, and so is deleting a branch. The hook decides for the
 * whole push: one refused ref refuses all of it.
 */
import { OBJECT_ID } from '../../runtime/git/archive.js';

export interface RefUpdate {
  old: string;
  new: string;
  ref: string;
}

export const ZERO_ID = '0'.repeat(40);

/** The branches that deploy to the app itself. */
export const PRODUCTION_BRANCHES = ['main', 'master'];

export type PushPlan =
  | { kind: 'deploy'; update: RefUpdate; branch: string; tags: RefUpdate[] }
  | { kind: 'keep'; tags: RefUpdate[] }
  | { kind: 'refuse'; reason: string };

/** git's pre-receive stdin: `<old> <new> <ref>` per line. */
export function parseUpdates(text: string): RefUpdate[] | undefined {
  const out: RefUpdate[] = [];
  for (const line of text.split('\n')) {
    if (line === '') continue;
    const [old, neu, ref, ...rest] = line.split(' ');
    if (!old || !neu || !ref || rest.length || !OBJECT_ID.test(old) || !OBJECT_ID.test(neu)) {
      return undefined;
    }
    out.push({ old, new: neu, ref });
  }
  return out;
}

export function planPush(updates: RefUpdate[]): PushPlan {
  const production: RefUpdate[] = [];
  const tags: RefUpdate[] = [];
  for (const u of updates) {
    if (u.new === ZERO_ID) {
      return {
        kind: 'refuse',
        reason: `deleting ${u.ref} is refused: pier keeps what it deployed (delete the app to stop it)`,
      };
    }
    if (u.ref.startsWith('refs/tags/')) {
      tags.push(u);
      continue;
    }
    const branch = u.ref.startsWith('refs/heads/') ? u.ref.slice('refs/heads/'.length) : undefined;
    if (branch === undefined) {
      return { kind: 'refuse', reason: `${u.ref}: only branches and tags can be pushed` };
    }
    if (!PRODUCTION_BRANCHES.includes(branch)) {
      return {
        kind: 'refuse',
        reason: `previews are not enabled for this app: only main (or master) deploys; push the branch as main (git push <remote> ${branch}:main)`,
      };
    }
    production.push(u);
  }
  if (production.length > 1) {
    return { kind: 'refuse', reason: 'push one of main and master at a time' };
  }
  const [update] = production;
  if (!update) return { kind: 'keep', tags };
  return { kind: 'deploy', update, branch: update.ref.slice('refs/heads/'.length), tags };
}
