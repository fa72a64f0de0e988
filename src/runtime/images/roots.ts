/**
 * Unpacked roots, one per manifest digest: `<dir>/roots/<hex>/`. A root is built in a temp
 * directory next to it and renamed into place when complete, so a crash leaves either no
 * root or a whole one (temp dirs are swept at start).
 *
 * `roots/` is mode 0700: image roots hold set-uid binaries owned by root (su, passwd,
 * ping…), and a local user who could reach them on the host could run them. Machines
 * reach a root through the sandbox, which runs as root, as an overlay lower dir; nothing
 * hands a root out writable.
 */
import { randomBytes } from 'node:crypto';
import { chmod, lstat, mkdir, readdir, rename, rm } from 'node:fs/promises';
import path from 'node:path';

const TMP_PREFIX = '.tmp-';

/**
 * The roots' directory: `roots-userns/`, as their files are owned by the machines' id
 * range (see sandbox/userns.ts), not by the images' own ids.
 */
const ROOTS = 'roots-userns';

/** The roots directory of a store. */
export class RootDirs {
  private readonly dir: string;

  constructor(storeDir: string) {
    this.dir = path.join(storeDir, ROOTS);
    this.storeDir = storeDir;
  }

  private readonly storeDir: string;

  async init(): Promise<void> {
    // Roots of before machines had user namespaces are owned by the images' own ids.
    await rm(path.join(this.storeDir, 'roots'), { recursive: true, force: true });
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    await chmod(this.dir, 0o700);
    for (const name of await readdir(this.dir)) {
      if (name.startsWith(TMP_PREFIX))
        await rm(path.join(this.dir, name), { recursive: true, force: true });
    }
  }

  /** Where the root of `digest` lives (whether or not it is there). */
  path(digest: string): string {
    return path.join(this.dir, digest.slice('sha256:'.length));
  }

  async exists(digest: string): Promise<boolean> {
    const st = await lstat(this.path(digest)).catch(() => undefined);
    return !!st?.isDirectory();
  }

  /**
   * Builds the root of `digest` with `fill` (which gets an empty directory) and puts it in
   * place. If a root appeared meanwhile (a concurrent builder), ours is discarded.
   */
  async build(digest: string, fill: (tmp: string) => Promise<void>): Promise<void> {
    const tmp = path.join(this.dir, `${TMP_PREFIX}${randomBytes(8).toString('hex')}`);
    await mkdir(tmp, { mode: 0o755 });
    try {
      await fill(tmp);
      await rename(tmp, this.path(digest)).catch(async (err: NodeJS.ErrnoException) => {
        if ((err.code === 'ENOTEMPTY' || err.code === 'EEXIST') && (await this.exists(digest))) {
          await rm(tmp, { recursive: true, force: true });
          return;
        }
        throw err;
      });
    } catch (err) {
      await rm(tmp, { recursive: true, force: true });
      throw err;
    }
  }

  /** Removes a root: renamed aside first, so a half-deleted root is never taken as whole. */
  async remove(digest: string): Promise<void> {
    const aside = path.join(this.dir, `${TMP_PREFIX}rm-${randomBytes(8).toString('hex')}`);
    try {
      await rename(this.path(digest), aside);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw err;
    }
    await rm(aside, { recursive: true, force: true });
  }
}

/**
 * Bytes of regular files under `dir`, each inode counted once (hard links share one).
 * This is what the root costs on disk, near enough, and what a machine sees as its image.
 */
export async function treeSize(dir: string): Promise<number> {
  const seen = new Set<string>();
  let total = 0;
  const walk = async (d: string): Promise<void> => {
    for (const entry of await readdir(d, { withFileTypes: true })) {
      const p = path.join(d, entry.name);
      if (entry.isDirectory()) await walk(p);
      else if (entry.isFile()) {
        const st = await lstat(p);
        const key = `${st.dev}:${st.ino}`;
        if (!seen.has(key)) {
          seen.add(key);
          total += st.size;
        }
      }
    }
  };
  await walk(dir);
  return total;
}
