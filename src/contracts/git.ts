/**
 * `git push` over HTTPS (CONTRACT 8): git's smart HTTP routes under `/git/<app>.git/`.
 * Their bodies and answers are git's protocol, not JSON; only the path and the query are
 * pier's to check.
 */
import { z } from 'zod';

/** `web.git` (or `web`): the app's repository. */
export const gitRepoParams = z.object({ repo: z.string().min(1).max(80) });

/** `info/refs` names the service git wants (`git-receive-pack` to push). */
export const gitRefsQuery = z.object({ service: z.string().max(64).optional() });
