/**
 * The tree of a pushed commit as a gzip'd tar, streamed from `git archive`: what the
 * sources store takes (and checks entry by entry: links out of the tree, `..`, devices,
 * the caps), exactly as an uploaded archive. Submodules are not in it (git archive leaves
 * them out); `.gitattributes` `export-ignore` is honoured.
 *
 * While a pre-receive hook runs, the pushed objects are still in the push's quarantine
 * (git keeps them apart until the hook says yes): `objectDir` names it, and the
 * repository's own objects are its alternate.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { PassThrough, type Readable } from 'node:stream';
import { gitEnv } from './git.js';

export const OBJECT_ID = /^[0-9a-f]{40}$/;

export interface CommitArchive {
  stream: Readable;
  /** Settles when git has ended: rejects with its stderr if it failed. */
  done: Promise<void>;
  /** Stops git (the reader went away). */
  stop(): void;
}

export function archiveCommit(repo: string, commit: string, objectDir?: string): CommitArchive {
  if (!OBJECT_ID.test(commit)) throw new Error(`not an object id: ${commit}`);
  const env: Record<string, string> = objectDir
    ? {
        GIT_OBJECT_DIRECTORY: objectDir,
        GIT_ALTERNATE_OBJECT_DIRECTORIES: path.join(repo, 'objects'),
      }
    : {};
  const child = spawn('git', ['--git-dir', repo, 'archive', '--format=tar.gz', commit], {
    env: gitEnv(env),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (c: string) => {
    if (stderr.length < 4096) stderr += c;
  });
  const done = new Promise<void>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code, signal) => {
      if (code === 0) resolve();
      else reject(new Error(`git archive failed (${signal ?? code}): ${stderr.trim()}`));
    });
  });
  done.catch(() => undefined); // read by the caller; never unhandled
  // Read at once: Node drains the stdout of a child that exits before anyone reads it
  // (a small tree is archived before the caller has its file open), and the bytes would
  // be lost. The pass-through holds what is not read yet (git waits past its mark).
  const stream = child.stdout.pipe(new PassThrough());
  return { stream, done, stop: () => child.kill('SIGKILL') };
}
