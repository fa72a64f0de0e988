/**
 * The git entrance of the SSH gateway (CONTRACT 8): `git push ssh://git@<gateway>/<app>.git`
 * logs in as `git` with a registered key and asks for `git-receive-pack '/<app>.git'`.
 * The push is the one a push over HTTPS makes (services/git: receive-pack, pier's hook,
 * build, deploy, `remote:` lines), for the app's organization when the key is registered
 * there; otherwise the app answers as a missing one. The key is tracked while the push
 * runs, so deleting it ends the push. Fetching and shells are refused with a line on
 * stderr, as git shows it.
 */
import { once } from 'node:events';
import { PassThrough } from 'node:stream';
import type { ServerChannel } from 'ssh2';
import { FETCH_REFUSED, parseGitCommand, serveGitReceivePack } from '../services/git/ssh-push.js';
import { keyLogin, loginKey } from '../services/ssh-logins.js';
import type { LoggedIn } from './logged-in.js';

/** What a `git` login that asks for anything but a push is told. */
export const GIT_ONLY =
  'the git user takes `git push` only; for a shell, log in as <app>@ or use an SSH token';

/** Serves one channel of a `git` login; answers its exit status, never throws. */
export async function serveGitChannel(
  c: LoggedIn,
  ch: ServerChannel,
  command: string | undefined,
  signal: AbortSignal,
): Promise<number> {
  const say = (line: string) => ch.stderr.write(`pier: ${line}\n`);
  const git = command === undefined ? undefined : parseGitCommand(command);
  if (!git) return (say(GIT_ONLY), 1);
  if (git.service === 'git-upload-pack') return (say(FETCH_REFUSED), 1);
  const { ctx, authenticator } = c.deps;
  const fingerprint = c.login.git?.fingerprint ?? '';
  const key = await keyLogin(ctx, git.app, fingerprint).catch(() => undefined);
  // Not the key of the app's organization: pushTarget answers for the login's own, where
  // the app is not, exactly as for a missing app.
  const login = key?.login ?? c.login;
  const tracked = authenticator.track(loginKey(login), login.orgId, 'ssh-key');
  // receive-pack's output ends before its exit status is known: ending the channel with
  // it would close it (the client's side has ended too) before the status is sent.
  const stdout = new PassThrough();
  stdout.pipe(ch, { end: false });
  try {
    const code = await serveGitReceivePack(ctx, {
      orgId: login.orgId,
      app: git.app,
      stdin: ch,
      stdout,
      stderr: ch.stderr,
      signal: AbortSignal.any([signal, tracked.signal]),
    });
    // Its last words are in the channel before the exit status.
    if (stdout.writableEnded && !stdout.readableEnded) await once(stdout, 'end');
    return code;
  } finally {
    tracked.done();
  }
}
