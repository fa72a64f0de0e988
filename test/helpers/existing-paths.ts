/** Which of `paths` exist (what a test expects gone after some work, say). */
import { access } from 'node:fs/promises';

export async function existingPaths(paths: string[]): Promise<string[]> {
  const found = await Promise.all(
    paths.map((p) =>
      access(p).then(
        () => p,
        () => undefined,
      ),
    ),
  );
  return found.filter((p): p is string => p !== undefined);
}
