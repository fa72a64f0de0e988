/**
 * The directory half of durable writes. fsync on a file makes its bytes durable, but its
 * name lives in the directory: after a rename (or a mkdir) the directory must be fsynced
 * too, or a power cut can lose a blob that was already reported as written.
 */
import { mkdir, open } from 'node:fs/promises';
import path from 'node:path';

/** Flushes a directory's entries to disk. */
export async function fsyncDir(dir: string): Promise<void> {
  const handle = await open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/**
 * Makes `dir` and its missing parents with mode 0700, and fsyncs the parent of each
 * directory it created, so a new directory cannot vanish after the first blob in it was
 * reported durable. Costs nothing extra when `dir` already exists, the common case.
 */
export async function mkdirDurable(dir: string): Promise<void> {
  const first = await mkdir(dir, { recursive: true, mode: 0o700 });
  if (first === undefined) return;
  // `first` is the topmost directory created; every level from it down to `dir` is new.
  for (let created = dir; ; created = path.dirname(created)) {
    await fsyncDir(path.dirname(created));
    if (created === first || path.dirname(created) === created) break;
  }
}
