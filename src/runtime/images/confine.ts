/**
 * Path confinement for unpacking: every entry of a layer lands inside the root, whatever
 * its name and whatever symlinks earlier entries (or earlier layers) made.
 *
 * - Entry names are root-relative: a leading `/` is dropped (as GNU tar and Docker do).
 *   A `..` component is refused outright: no legitimate layer has one, and refusing is
 *   simpler to trust than cleaning.
 * - Parent directories are resolved as if the root were `/` (a chroot): a symlink met on
 *   the way is followed, an absolute target restarts at the root and `..` stops at the
 *   root. So a layer with `evil -> /` and then `evil/file` writes `<root>/file`, which is
 *   where that file would be inside the machine anyway.
 * - The last component is never followed: it is what the entry creates or replaces.
 *
 * This is safe without openat2/RESOLVE_IN_ROOT because the unpacker is the only writer of
 * the directory while it works (a temp dir of its own): nothing can swap a checked
 * directory for a symlink between the check and the use.
 */
import { lstat, readlink } from 'node:fs/promises';
import path from 'node:path';
import { ImageError } from './errors.js';

const MAX_SYMLINK_HOPS = 40;

/**
 * Splits an entry name into root-relative components. `[]` is the root itself. Throws
 * `unsupported` for names that climb out (`..`) or hold a NUL byte.
 */
export function entryComponents(name: string, layer: string): string[] {
  if (name.includes('\0')) {
    throw new ImageError(
      'unsupported',
      `Layer ${layer} has an entry name with a NUL byte; refusing it.`,
    );
  }
  const parts = name.split('/').filter((c) => c !== '' && c !== '.');
  if (parts.includes('..')) {
    throw new ImageError(
      'unsupported',
      `Layer ${layer} has an entry "${name}" that points outside the image root; refusing the layer.`,
    );
  }
  return parts;
}

/** The outcome of resolving a directory path inside the root. */
export interface Resolved {
  /** Absolute host path of the directory (it may not exist yet). */
  abs: string;
  /** Its components below the root, symlinks resolved. */
  rel: string[];
  /** False when some component does not exist yet (the caller creates it). */
  exists: boolean;
}

/**
 * Resolves `components` (a directory) inside `root`, following symlinks with chroot
 * semantics. Components from the first missing one on are taken literally. Throws
 * `unsupported` when a component is neither a directory nor a symlink, or on a symlink loop.
 */
export async function resolveDir(
  root: string,
  components: string[],
  layer: string,
): Promise<Resolved> {
  const rel: string[] = [];
  const pending = [...components];
  let hops = 0;
  // rel[missingAt] is the first component that does not exist; -1 while all exist. Only
  // below a missing directory are names taken literally: a `..` (from a symlink target)
  // that climbs back above it must bring back checking, or `gone/../link/x` would be
  // created through `link` by the kernel, outside our resolution.
  let missingAt = -1;
  while (pending.length > 0) {
    const c = pending.shift()!;
    if (c === '' || c === '.') continue;
    if (c === '..') {
      rel.pop();
      if (missingAt >= rel.length) missingAt = -1;
      continue;
    }
    if (missingAt >= 0) {
      rel.push(c);
      continue;
    }
    const abs = path.join(root, ...rel, c);
    const st = await lstat(abs).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return undefined;
      throw err;
    });
    if (!st) {
      missingAt = rel.length;
      rel.push(c);
    } else if (st.isSymbolicLink()) {
      if (++hops > MAX_SYMLINK_HOPS) {
        throw new ImageError(
          'unsupported',
          `Layer ${layer} has a symlink loop at /${[...rel, c].join('/')}.`,
        );
      }
      const target = await readlink(abs);
      if (target.startsWith('/')) rel.length = 0;
      pending.unshift(...target.split('/'));
    } else if (st.isDirectory()) {
      rel.push(c);
    } else {
      throw new ImageError(
        'unsupported',
        `Layer ${layer} puts an entry under /${[...rel, c].join('/')}, which is not a directory.`,
      );
    }
  }
  return { abs: path.join(root, ...rel), rel, exists: missingAt < 0 };
}
