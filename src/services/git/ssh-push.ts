/**
 * The entrance the SSH gateway uses for `git push ssh://git@<gateway>/<app>.git`
 * (CONTRACT 8): the exec request's command is read by `parseGitCommand`, and a
 * `git-receive-pack` is handed, with the channel's streams, to `serveGitReceivePack`:
 * the same receive-pack, hook and deploy as a push over HTTPS. Failures before git
 * starts (an app the organization does not have, fetching) are one `pier: … (code)`
 * line on stderr and exit status 1, as git shows them to the person pushing.
 */
import { ApiError } from '../../errors/api-error.js';
import type { ServiceContext } from '../context.js';
import { pushTarget, receivePush, type PushStreams } from './push.js';

export interface GitCommand {
  service: 'git-receive-pack' | 'git-upload-pack';
  app: string;
}

/**
 * `git-receive-pack '/web.git'` (what git sends over SSH; `git receive-pack`, no quotes,
 * no slash and no `.git` are taken too) → `{service, app}`; anything else → undefined.
 */
export function parseGitCommand(command: string): GitCommand | undefined {
  const m =
    /^git[- ](receive-pack|upload-pack) +'?\/?([a-z0-9][a-z0-9-]{0,62}?)(?:\.git)?\/?'?$/.exec(
      command.trim(),
    );
  if (!m) return undefined;
  return { service: `git-${m[1] as 'receive-pack' | 'upload-pack'}`, app: m[2]! };
}

export interface SshPush extends PushStreams {
  /** The organization the authenticated SSH key belongs to (or acts as). */
  orgId: string;
  /** The app named by the command (`parseGitCommand`). */
  app: string;
  /** receive-pack's diagnostics and pier's refusals: the channel's stderr. */
  stderr: NonNullable<PushStreams['stderr']>;
}

/**
 * Runs a whole receive-pack conversation over the SSH channel's streams for a key the
 * gateway has authenticated and judged allowed to deploy `app` of `orgId`. Answers the
 * exit status for the channel; never throws.
 */
export async function serveGitReceivePack(ctx: ServiceContext, push: SshPush): Promise<number> {
  try {
    const target = await pushTarget(ctx, push.orgId, push.app);
    return await receivePush(ctx, push.orgId, target, 'session', push);
  } catch (err) {
    if (err instanceof ApiError) push.stderr.write(`pier: ${err.message} (${err.code})\n`);
    else {
      ctx.log.error({ err, app: push.app }, 'git push over SSH failed');
      push.stderr.write('pier: the platform failed to take this push\n');
    }
    push.stdin.resume();
    return 1;
  }
}

/** The refusal of `git-upload-pack` (fetch, clone): pier takes pushes only. */
export const FETCH_REFUSED =
  'pier takes pushes only: fetching and cloning an app repository are not offered (your own repository is the source of truth)';
