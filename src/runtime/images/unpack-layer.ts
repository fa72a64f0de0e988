/**
 * Applies one layer (a tar stream) to a root directory, the way OCI image layers stack:
 *
 * - `.wh.<name>` deletes `<name>` from the layers below; `.wh..wh..opq` makes its
 *   directory opaque: whatever lower layers put there goes, what this layer put there
 *   stays (whatever the order of entries in the tar). Whiteout files are never created.
 * - Files, directories, symlinks and hard links are created with their mode, owner (when
 *   we run as root) and mtime. Devices and FIFOs are skipped and counted: a machine gets
 *   its /dev from the sandbox, and an image must not bring device nodes onto the host.
 * - An entry replaces what was there, except that a directory over a directory merges.
 * - Every path goes through confine.ts, so nothing is written outside the root; files are
 *   opened with O_EXCL|O_NOFOLLOW and directories with O_NOFOLLOW as a second line.
 * - With a budget (limits.ts), every entry, every regular file's size (from its header,
 *   before a byte of it is written) and every uncompressed byte of the tar stream is
 *   charged as it is read, and the first one past a cap stops the layer (`too-large`).
 *
 * Entries are applied one at a time; this module is the only writer of the root while it
 * works (the caller unpacks into a temp dir of its own).
 */
import { constants } from 'node:fs';
import { link, lstat, lutimes, lchown, mkdir, open, readdir, rm, symlink } from 'node:fs/promises';
import path from 'node:path';
import type { ReadEntry } from 'tar';
import { entryComponents, resolveDir, type Resolved } from './confine.js';
import { ImageError } from './errors.js';
import { openLayer } from './layer-stream.js';
import type { UnpackBudget } from './limits.js';
import { TarFormatError, tarEntries } from './tar-entries.js';

const WHITEOUT = '.wh.';
const OPAQUE = '.wh..wh..opq';
const FILE_FLAGS = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;
const DIR_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;

/** Options of {@link applyLayer}. */
export interface ApplyLayerOptions {
  /** The root being built (a directory only we write to). */
  root: string;
  /** The layer's digest, for messages. */
  layer: string;
  /** The expected sha256 of the uncompressed tar (config `rootfs.diff_ids`). */
  diffId?: string;
  signal?: AbortSignal;
  /** The image's running count against its caps, shared by all its layers; none = no cap. */
  budget?: UnpackBudget;
  /**
   * The host id an entry's uid or gid becomes (when unpacking as root). Machines' roots
   * shift them into the machines' user-namespace range; default: kept as they are.
   */
  owner?: (id: number) => number;
}

/** What applying a layer skipped: devices and FIFOs, and entry types tar does not know. */
export interface ApplyLayerResult {
  skipped: number;
}

interface LayerState {
  root: string;
  layer: string;
  asRoot: boolean;
  owner: (id: number) => number;
  /** Paths (root-relative, resolved) this layer wrote, with all their ancestors. */
  touched: Set<string>;
  /** Directory mtimes, set at the end: entries written into them would change them again. */
  dirTimes: Map<string, Date>;
  skipped: number;
  budget: UnpackBudget | undefined;
}

/** Applies the layer blob stored at `file` to `opts.root`. */
export async function applyLayer(file: string, opts: ApplyLayerOptions): Promise<ApplyLayerResult> {
  const state: LayerState = {
    root: opts.root,
    layer: opts.layer,
    asRoot: process.getuid?.() === 0,
    owner: opts.owner ?? ((id) => id),
    touched: new Set(),
    dirTimes: new Map(),
    skipped: 0,
    budget: opts.budget,
  };
  const { budget } = opts;
  // The root itself, which no entry may name: owned like an image's `/`.
  if (state.asRoot) await lchown(opts.root, state.owner(0), state.owner(0));
  const stream = await openLayer(file, opts.layer, opts.signal, budget && ((n) => budget.tar(n)));
  const stats = { ignored: 0 };
  let ignored = 0;
  try {
    for await (const entry of tarEntries(stream.chunks, stats)) {
      opts.signal?.throwIfAborted();
      // Entries the parser skipped (unknown types) count too: they were read all the same.
      budget?.entry(1 + stats.ignored - ignored);
      ignored = stats.ignored;
      await applyEntry(entry, state);
    }
  } catch (err) {
    if (err instanceof TarFormatError) {
      throw new ImageError(
        'unsupported',
        `Layer ${opts.layer} is not a valid tar archive: ${err.message}.`,
      );
    }
    throw err;
  }
  const got = stream.diffId();
  if (opts.diffId && got !== opts.diffId) {
    throw new ImageError(
      'digest-mismatch',
      `Layer ${opts.layer} unpacks to ${got}, but the image config says ${opts.diffId}.`,
    );
  }
  // Deepest first, so setting a child's time does not disturb its parent's afterwards.
  const dirs = [...state.dirTimes].sort((a, b) => b[0].length - a[0].length);
  for (const [dir, time] of dirs) await lutimes(dir, time, time).catch(() => undefined);
  return { skipped: state.skipped + stats.ignored };
}

function markTouched(state: LayerState, rel: string[]): void {
  for (let i = 1; i <= rel.length; i++) state.touched.add(rel.slice(0, i).join('/'));
}

/** Resolves an entry's parent inside the root, creating missing directories. */
async function ensureParent(state: LayerState, parts: string[]): Promise<Resolved> {
  const parent = await resolveDir(state.root, parts, state.layer);
  if (!parent.exists) {
    const first = await mkdir(parent.abs, { recursive: true, mode: 0o755 });
    // Directories no entry named are root's, as in any image: root's as `owner` maps it.
    if (first !== undefined && state.asRoot) {
      for (let dir = parent.abs; ; dir = path.dirname(dir)) {
        await lchown(dir, state.owner(0), state.owner(0));
        if (dir === first || dir.length <= first.length) break;
      }
    }
  }
  return parent;
}

/** Removes what is at `dst` unless it is a directory and `keepDir`; says whether a dir remains. */
async function clear(dst: string, keepDir: boolean): Promise<boolean> {
  const st = await lstat(dst).catch(() => undefined);
  if (!st) return false;
  if (st.isDirectory()) {
    if (keepDir) return true;
    await rm(dst, { recursive: true, force: true });
  } else {
    await rm(dst, { force: true });
  }
  return false;
}

async function applyEntry(entry: ReadEntry, state: LayerState): Promise<void> {
  const parts = entryComponents(entry.path, state.layer);
  if (parts.length === 0) {
    // The root itself ("./"): take its mode and owner, nothing else.
    if (entry.type === 'Directory') await setDirMeta(state.root, entry, state);
    return;
  }
  const name = parts[parts.length - 1]!;
  const parentParts = parts.slice(0, -1);

  if (name.startsWith(WHITEOUT)) {
    const parent = await resolveDir(state.root, parentParts, state.layer);
    if (!parent.exists) return;
    if (name === OPAQUE) await makeOpaque(state, parent.abs, parent.rel);
    // Other `.wh..wh.` names are aufs bookkeeping, not deletions.
    else if (!name.startsWith(`${WHITEOUT}${WHITEOUT}`)) {
      const victim = name.slice(WHITEOUT.length);
      // `.wh...` would name the parent's parent: path.join must never see `..` or `.`.
      if (victim === '..' || victim === '.' || victim === '') {
        throw new ImageError(
          'unsupported',
          `Layer ${state.layer} has a malformed whiteout "${entry.path}".`,
        );
      }
      await rm(path.join(parent.abs, victim), { recursive: true, force: true });
    }
    return;
  }

  switch (entry.type) {
    case 'Directory':
    case 'GNUDumpDir': {
      const parent = await ensureParent(state, parentParts);
      const dst = path.join(parent.abs, name);
      if (!(await clear(dst, true))) await mkdir(dst, { mode: 0o700 });
      await setDirMeta(dst, entry, state);
      markTouched(state, [...parent.rel, name]);
      return;
    }
    case 'File':
    case 'OldFile':
    case 'ContiguousFile': {
      // Charged before anything is created: a bomb's first big file writes nothing.
      state.budget?.file(entry.size ?? 0);
      const parent = await ensureParent(state, parentParts);
      const dst = path.join(parent.abs, name);
      await clear(dst, false);
      await writeFile(dst, entry, state);
      markTouched(state, [...parent.rel, name]);
      return;
    }
    case 'SymbolicLink': {
      const parent = await ensureParent(state, parentParts);
      const dst = path.join(parent.abs, name);
      await clear(dst, false);
      await symlink(entry.linkpath ?? '', dst);
      if (state.asRoot) await lchown(dst, ...ids(state, entry));
      if (entry.mtime) await lutimes(dst, entry.mtime, entry.mtime);
      markTouched(state, [...parent.rel, name]);
      return;
    }
    case 'Link': {
      const target = await linkTarget(entry.linkpath ?? '', state);
      const parent = await ensureParent(state, parentParts);
      const dst = path.join(parent.abs, name);
      if (dst === target) return;
      await clear(dst, false);
      await link(target, dst);
      markTouched(state, [...parent.rel, name]);
      return;
    }
    default:
      // CharacterDevice, BlockDevice, FIFO: never created (see the header comment).
      state.skipped++;
  }
}

/** Where a hard link's target is, inside the root; it must exist and not be a directory. */
async function linkTarget(linkpath: string, state: LayerState): Promise<string> {
  const parts = entryComponents(linkpath, state.layer);
  if (parts.length === 0) {
    throw new ImageError(
      'unsupported',
      `Layer ${state.layer} has a hard link to the root directory.`,
    );
  }
  const parent = await resolveDir(state.root, parts.slice(0, -1), state.layer);
  const target = path.join(parent.abs, parts[parts.length - 1]!);
  const st = parent.exists ? await lstat(target).catch(() => undefined) : undefined;
  if (!st || st.isDirectory()) {
    throw new ImageError(
      'unsupported',
      `Layer ${state.layer} has a hard link to /${linkpath}, which is ${st ? 'a directory' : 'missing'}.`,
    );
  }
  return target;
}

/** The host uid and gid of `entry`'s owner. */
function ids(state: LayerState, entry: ReadEntry): [number, number] {
  return [state.owner(entry.uid ?? 0), state.owner(entry.gid ?? 0)];
}

async function writeFile(dst: string, entry: ReadEntry, state: LayerState): Promise<void> {
  const fh = await open(dst, FILE_FLAGS, 0o600);
  try {
    for await (const chunk of entry as AsyncIterable<Buffer>) {
      let off = 0;
      while (off < chunk.length)
        off += (await fh.write(chunk, off, chunk.length - off)).bytesWritten;
    }
    // chown before chmod: chown clears set-id bits.
    if (state.asRoot) await fh.chown(...ids(state, entry));
    await fh.chmod(entry.mode ?? 0o644);
    if (entry.mtime) await fh.utimes(entry.mtime, entry.mtime);
  } finally {
    await fh.close();
  }
}

async function setDirMeta(dir: string, entry: ReadEntry, state: LayerState): Promise<void> {
  const fh = await open(dir, DIR_FLAGS);
  try {
    if (state.asRoot) await fh.chown(...ids(state, entry));
    await fh.chmod(entry.mode ?? 0o755);
  } finally {
    await fh.close();
  }
  if (entry.mtime) state.dirTimes.set(dir, entry.mtime);
}

/** Removes everything under `abs` that this layer did not write (recursively). */
async function makeOpaque(state: LayerState, abs: string, rel: string[]): Promise<void> {
  for (const child of await readdir(abs)) {
    const childRel = [...rel, child];
    const childAbs = path.join(abs, child);
    if (!state.touched.has(childRel.join('/'))) {
      await rm(childAbs, { recursive: true, force: true });
      continue;
    }
    const st = await lstat(childAbs);
    if (st.isDirectory()) await makeOpaque(state, childAbs, childRel);
  }
}
