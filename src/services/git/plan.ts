/**
 * What a push asks for, read from the ref updates git hands the pre-receive hook, and
 * what pier does with it, by the app's Git settings (settings.ts). The production branch
 * (the one set, else `main` or `master`, for repositories that still use it) deploys the
 * app; any other branch deploys its own preview of the app (services/previews), or, with
 * branch previews off, is only stored; deleting a branch removes its preview; tags are
 * kept and deploy nothing. One branch a push; deleting the production branch is refused.
 * The hook decides for the whole push: one refused ref refuses all of it.
 */
import { DEFAULT_PRODUCTION_BRANCHES } from '../../contracts/git.js';
import { OBJECT_ID } from '../../runtime/git/archive.js';

export interface RefUpdate {
  old: string;
  new: string;
  ref: string;
}

export const ZERO_ID = '0'.repeat(40);

/** An app's Git settings, as a push needs them (`GET /v1/apps/:name/git`). */
export interface PushSettings {
  /** The branch that deploys the app; null: `main` or `master`. */
  productionBranch: string | null;
  /** Whether another branch deploys its preview; false: it is stored, nothing more. */
  branchPreviews: boolean;
}

/** What an app had before it had settings: main or master deploys, branches preview. */
export const DEFAULT_PUSH_SETTINGS: PushSettings = { productionBranch: null, branchPreviews: true };

/** The branches whose push deploys the app itself. */
export function productionBranchesOf(settings: PushSettings): string[] {
  return settings.productionBranch === null
    ? DEFAULT_PRODUCTION_BRANCHES
    : [settings.productionBranch];
}

export type PushPlan =
  | { kind: 'deploy'; update: RefUpdate; branch: string; tags: RefUpdate[] }
  | { kind: 'preview'; update: RefUpdate; branch: string; tags: RefUpdate[] }
  /** Branch previews are off: the branch moves, nothing deploys. */
  | { kind: 'store'; update: RefUpdate; branch: string; tags: RefUpdate[] }
  | { kind: 'unpreview'; branch: string; tags: RefUpdate[] }
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

export function planPush(updates: RefUpdate[], settings: PushSettings): PushPlan {
  const production = productionBranchesOf(settings);
  const branches: { update: RefUpdate; branch: string }[] = [];
  const tags: RefUpdate[] = [];
  for (const u of updates) {
    if (u.ref.startsWith('refs/tags/')) {
      if (u.new === ZERO_ID) return { kind: 'refuse', reason: `deleting ${u.ref} is refused` };
      tags.push(u);
      continue;
    }
    const branch = u.ref.startsWith('refs/heads/') ? u.ref.slice('refs/heads/'.length) : undefined;
    if (branch === undefined) {
      return { kind: 'refuse', reason: `${u.ref}: only branches and tags can be pushed` };
    }
    if (u.new === ZERO_ID && production.includes(branch)) {
      return {
        kind: 'refuse',
        reason: `deleting ${u.ref} is refused: pier keeps what it deployed (delete the app to stop it)`,
      };
    }
    branches.push({ update: u, branch });
  }
  if (branches.length > 1) return { kind: 'refuse', reason: 'push one branch at a time' };
  const [one] = branches;
  if (!one) return { kind: 'keep', tags };
  const { update, branch } = one;
  // A deleted branch takes its preview along, whether previews are on now or not.
  if (update.new === ZERO_ID) return { kind: 'unpreview', branch, tags };
  if (production.includes(branch)) return { kind: 'deploy', update, branch, tags };
  return { kind: settings.branchPreviews ? 'preview' : 'store', update, branch, tags };
}

/**
 * The name of the preview a branch deploys to: the branch as a DNS label (lower case,
 * runs of anything else as one `-`), cut so that `<app>--<name>` fits an app name (63).
 * Undefined when nothing of the branch's name is left.
 */
export function previewNameOf(app: string, branch: string): string | undefined {
  const room = 63 - app.length - 2;
  const name = branch
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .slice(0, Math.max(0, room))
    .replace(/^-+|-+$/g, '');
  return name === '' ? undefined : name;
}
