/**
 * One `pier serve` per data dir. The lock is a file holding the owner's pid, created
 * exclusively; a lock whose process is gone (a crash) is taken over.
 */
import { mkdir, readFile, unlink, writeFile } from 'node:fs/promises';
import path from 'node:path';

export class DataDirLockedError extends Error {}

/** Whether process `pid` exists (EPERM: it does, as another user's). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

export interface DataDirLock {
  release(): Promise<void>;
}

export async function lockDataDir(dataDir: string): Promise<DataDirLock> {
  await mkdir(dataDir, { recursive: true, mode: 0o711 });
  const file = path.join(dataDir, 'serve.lock');
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      await writeFile(file, `${process.pid}\n`, { flag: 'wx', mode: 0o600 });
      return {
        async release() {
          await unlink(file).catch(() => {});
        },
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const pid = Number((await readFile(file, 'utf8').catch(() => '')).trim());
      if (pid > 0 && pid !== process.pid && alive(pid)) {
        throw new DataDirLockedError(
          `another pier serve (pid ${pid}) is already using the data dir ${dataDir}; ` +
            'stop it first or choose another --data-dir',
        );
      }
      await unlink(file).catch(() => {}); // stale: its owner is gone
    }
  }
  throw new DataDirLockedError(`could not lock the data dir ${dataDir}`);
}
