/**
 * `git push` (CONTRACT 8): git's smart HTTP routes under `/git/<app>.git/`, whose bodies
 * and answers are git's protocol, not JSON (only the path and the query are pier's to
 * check); and an app's Git settings (`GET`/`PUT /v1/apps/:name/git`, issue #26): which
 * branch deploys the app, and whether other branches deploy previews.
 */
import { z } from 'zod';

/** `web.git` (or `web`): the app's repository. */
export const gitRepoParams = z.object({ repo: z.string().min(1).max(80) });

/** `info/refs` names the service git wants (`git-receive-pack` to push). */
export const gitRefsQuery = z.object({ service: z.string().max(64).optional() });

/** The branches that deploy an app whose `productionBranch` is not set. */
export const DEFAULT_PRODUCTION_BRANCHES = ['main', 'master'];

/** The longest branch name an app's settings take. */
export const BRANCH_NAME_MAX = 255;

/**
 * Why `name` is not a branch name git would make (`git check-ref-format --branch`), or
 * undefined when it is one. Pure, so the route, the CLI and the tests share one rule.
 */
export function branchNameProblem(name: string): string | undefined {
  if (name === '') return 'is empty';
  if (name.length > BRANCH_NAME_MAX) return `is longer than ${BRANCH_NAME_MAX} characters`;
  // Control characters, DEL and the space: git refuses them in any ref.
  // eslint-disable-next-line no-control-regex
  if (/[\x00-\x20\x7f]/.test(name)) return 'may not contain spaces or control characters';
  const bad = /[~^:?*[\\]/.exec(name);
  if (bad) return `may not contain '${bad[0]}'`;
  if (name.includes('..')) return "may not contain '..'";
  if (name.includes('@{')) return "may not contain '@{'";
  if (name === '@' || name === 'HEAD') return `may not be '${name}'`;
  if (name.startsWith('-')) return "may not start with '-'";
  if (name.startsWith('/') || name.endsWith('/') || name.includes('//')) {
    return "may not start or end with '/', nor contain '//'";
  }
  if (name.endsWith('.')) return "may not end with '.'";
  for (const part of name.split('/')) {
    if (part.startsWith('.')) return "no part of it (between '/') may start with '.'";
    if (part.endsWith('.lock')) return "no part of it (between '/') may end with '.lock'";
  }
  return undefined;
}

export const branchNameSchema = z.string().superRefine((name, ctx) => {
  const problem = branchNameProblem(name);
  if (problem) ctx.addIssue({ code: 'custom', message: `a branch name that ${problem}` });
});

/** `PUT /v1/apps/:name/git`: each field left out keeps its value. */
export const setAppGitBody = z.strictObject({
  /** The branch that deploys the app; null goes back to the default (main or master). */
  productionBranch: branchNameSchema.nullable().optional(),
  /** Whether a push of another branch deploys that branch's preview. */
  branchPreviews: z.boolean().optional(),
});
export type SetAppGitBody = z.infer<typeof setAppGitBody>;

export const appGitSchema = z.object({
  app: z.string(),
  /** The branch set to deploy the app; null: the default, main or master. */
  productionBranch: z.string().nullable(),
  /** The branches whose push deploys the app now (what productionBranch means). */
  productionBranches: z.array(z.string()),
  /** Whether a push of another branch deploys its preview (false: it is only stored). */
  branchPreviews: z.boolean(),
  /** Set when the app is itself a preview (of this app): it makes no previews. */
  previewOf: z.string().optional(),
  /** Where to push: HTTPS (an API key as the password) and the SSH gateway. */
  pushUrls: z.object({ https: z.string(), ssh: z.string() }),
});
export type AppGit = z.infer<typeof appGitSchema>;
