/**
 * Handing a whole directory tree to another owner: what a copy needs when it becomes
 * another database's (a snapshot of a template, a branch, a restored base backup), and
 * what an upgrade needs when servers change identity. Only root does this, and only on
 * trees no server is writing to (a fresh copy, a stopped server's volume).
 */
import { execFile } from 'node:child_process';
import { lchown, lstat, readdir } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface TreeOwner {
  uid: number;
  gid: number;
}

/**
 * Gives `dir` and everything under it to `owner`; the top goes last, so a top that
 * belongs to `owner` means the whole tree does (a crash halfway is redone). chown's `-P`
 * never follows a symlink (one planted in the tree cannot lead it out) and `-h` changes
 * links themselves.
 */
export async function handOverTree(dir: string, owner: TreeOwner): Promise<void> {
  if ((process.getuid?.() ?? 0) !== 0) return;
  const entries = (await readdir(dir)).map((name) => path.join(dir, name));
  if (entries.length > 0) {
    await run('chown', ['-R', '-P', '-h', `${owner.uid}:${owner.gid}`, '--', ...entries], {
      maxBuffer: 16 * 1024 * 1024,
    }).catch((err: Error & { stderr?: string }) => {
      throw new Error(`cannot hand ${dir} to uid ${owner.uid}: ${err.stderr || err.message}`);
    });
  }
  await lchown(dir, owner.uid, owner.gid);
}

/**
 * Hands `dir` over unless its top already belongs to `owner`: every path that gives a
 * tree to a server hands it over whole, so the top's owner tells whether it was done.
 * A missing `dir` (not laid out yet) has nothing to hand over.
 */
export async function handOverIfForeign(dir: string, owner: TreeOwner): Promise<boolean> {
  if ((process.getuid?.() ?? 0) !== 0) return false;
  const st = await lstat(dir).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return undefined;
    throw err;
  });
  if (!st || (st.uid === owner.uid && st.gid === owner.gid)) return false;
  await handOverTree(dir, owner);
  return true;
}

/** The uid that owns `dir` itself (a server's data directory: its identity). */
export async function ownerUid(dir: string): Promise<number> {
  return (await lstat(dir)).uid;
}
