/**
 * The push's quarantine, as the hook reported it (`GIT_QUARANTINE_PATH`): git keeps the
 * objects of a push there until pre-receive says yes, so reading the pushed commit means
 * reading there. pier reads only a directory git makes for that in the app's own
 * repository (`objects/tmp_objdir-incoming-*`, resolved), whatever the hook claimed.
 */
import { realpath } from 'node:fs/promises';
import path from 'node:path';

export async function quarantineOf(repo: string, reported: string): Promise<string | undefined> {
  // No quarantine (objects already present, as for a push of a known commit): the
  // repository's own objects hold the commit.
  if (reported === '') return undefined;
  const objects = await realpath(path.join(repo, 'objects'));
  const dir = await realpath(reported).catch(() => undefined);
  if (
    !dir ||
    path.dirname(dir) !== objects ||
    !path.basename(dir).startsWith('tmp_objdir-incoming-')
  ) {
    throw new Error(`the hook named a quarantine outside the repository: ${reported}`);
  }
  return dir;
}
