/**
 * Source archives (gzip'd tar) of builds: checked entry by entry when uploaded, and
 * unpacked into a build's context.
 *
 * The check refuses what could reach outside the tree or the host: absolute paths, `..`,
 * device files and FIFOs, hard links to outside, and symbolic links whose target leaves the
 * tree once resolved the way the kernel would (following the archive's other links, with
 * `..` taken physically: `a -> .` then `b -> a/..` leaves). It caps the entries and the
 * unpacked bytes (a zip bomb stops at the cap, having been read, never written).
 *
 * Unpacking writes nothing through a symbolic link: every parent of an entry must be a
 * real directory the unpack made, so even an archive that skipped the check stays inside.
 */
import { createReadStream, createWriteStream } from 'node:fs';
import { link, lstat, mkdir, symlink } from 'node:fs/promises';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';
import { tarEntries } from '../images/tar-entries.js';

/** Why an archive is refused: `bad` (400, naming the entry) or `too-large` (413). */
export class SourceArchiveError extends Error {
  override name = 'SourceArchiveError';
  constructor(
    readonly code: 'bad' | 'too-large',
    message: string,
    readonly entry?: string,
  ) {
    super(message);
  }
}

/** The caps on one archive's contents. */
export interface SourceCaps {
  maxFiles: number;
  maxUnpackedBytes: number;
}

const MAX_LINK_HOPS = 40;

/** `p` as clean relative components; throws for absolute paths and `..`. */
function components(p: string): string[] {
  if (p.startsWith('/')) throw new SourceArchiveError('bad', `${p}: an absolute path.`, p);
  const parts = p.split('/').filter((c) => c !== '' && c !== '.');
  if (parts.includes('..')) throw new SourceArchiveError('bad', `${p}: a path with "..".`, p);
  return parts;
}

/** Whether the symlink at `at` (components) pointing to `target` resolves outside the tree. */
function leavesTree(at: string[], target: string, links: Map<string, string>): boolean {
  if (target.startsWith('/')) return true;
  const cur = at.slice(0, -1);
  const queue = target.split('/');
  let hops = 0;
  while (queue.length > 0) {
    const c = queue.shift()!;
    if (c === '' || c === '.') continue;
    if (c === '..') {
      if (cur.length === 0) return true;
      cur.pop();
      continue;
    }
    cur.push(c);
    const next = links.get(cur.join('/'));
    if (next !== undefined) {
      if (++hops > MAX_LINK_HOPS || next.startsWith('/')) return true;
      cur.pop();
      queue.unshift(...next.split('/'));
    }
  }
  return false;
}

async function* entriesOf(file: string) {
  const gunzip = createGunzip();
  const source = createReadStream(file).pipe(gunzip);
  source.on('error', () => undefined); // surfaced through the iterator below
  try {
    yield* tarEntries(source);
  } finally {
    source.destroy();
  }
}

/** Checks the archive at `file`; returns how many entries it holds. */
export async function checkSourceArchive(file: string, caps: SourceCaps): Promise<number> {
  const links = new Map<string, string>();
  let files = 0;
  let bytes = 0;
  try {
    for await (const e of entriesOf(file)) {
      const parts = components(e.path);
      if (++files > caps.maxFiles) {
        throw new SourceArchiveError('too-large', `More than ${caps.maxFiles} entries.`);
      }
      bytes += e.size;
      if (bytes > caps.maxUnpackedBytes) {
        throw new SourceArchiveError(
          'too-large',
          `It unpacks to more than ${caps.maxUnpackedBytes} bytes.`,
        );
      }
      switch (e.type) {
        case 'File':
        case 'OldFile':
        case 'ContiguousFile':
        case 'Directory':
          break;
        case 'SymbolicLink':
          if (parts.length === 0)
            throw new SourceArchiveError('bad', 'A link at the root.', e.path);
          links.set(parts.join('/'), e.linkpath ?? '');
          break;
        case 'Link':
          try {
            components(e.linkpath ?? ''); // a hard link names a path of the archive
          } catch {
            throw new SourceArchiveError(
              'bad',
              `${e.path}: a hard link to ${e.linkpath}, outside the tree.`,
              e.path,
            );
          }
          break;
        default:
          throw new SourceArchiveError('bad', `${e.path}: a ${e.type} entry.`, e.path);
      }
      e.resume();
    }
  } catch (err) {
    if (err instanceof SourceArchiveError) throw err;
    throw new SourceArchiveError('bad', `Not a gzip'd tar archive: ${(err as Error).message}`);
  }
  for (const [at, target] of links) {
    if (leavesTree(at.split('/'), target, links)) {
      throw new SourceArchiveError('bad', `${at}: a link to ${target}, outside the tree.`, at);
    }
  }
  return files;
}

/** Makes `rel`'s parents under `root`, refusing to pass through anything but directories. */
async function parentsOf(root: string, parts: string[]): Promise<string> {
  let dir = root;
  for (const c of parts.slice(0, -1)) {
    dir = path.join(dir, c);
    const st = await lstat(dir).catch(() => undefined);
    if (!st) await mkdir(dir, { mode: 0o755 });
    else if (!st.isDirectory()) {
      throw new SourceArchiveError('bad', `${parts.join('/')}: its parent is not a directory.`);
    }
  }
  return path.join(dir, parts[parts.length - 1]!);
}

/** Unpacks the checked archive `file` into the empty directory `root`. */
export async function unpackSource(file: string, root: string): Promise<void> {
  for await (const e of entriesOf(file)) {
    const parts = components(e.path);
    if (parts.length === 0) {
      e.resume();
      continue;
    }
    const dest = await parentsOf(root, parts);
    const mode = (e.mode ?? 0o644) & 0o755;
    if (e.type === 'Directory') {
      const st = await lstat(dest).catch(() => undefined);
      if (!st) await mkdir(dest, { mode: mode | 0o700 });
      else if (!st.isDirectory())
        throw new SourceArchiveError('bad', `${e.path}: not a directory.`);
      e.resume();
    } else if (e.type === 'SymbolicLink') {
      await symlink(e.linkpath ?? '', dest);
      e.resume();
    } else if (e.type === 'Link') {
      const target = await parentsOf(root, components(e.linkpath ?? ''));
      const st = await lstat(target).catch(() => undefined);
      if (!st?.isFile()) throw new SourceArchiveError('bad', `${e.path}: links to no file.`);
      await link(target, dest);
      e.resume();
    } else {
      // 'wx': never over an existing entry (a link placed there earlier included).
      await pipeline(e, createWriteStream(dest, { flags: 'wx', mode: mode | 0o600 }));
    }
  }
}

/** The top level of a checked archive: its names, and the text of the `wanted` files. */
export async function readTopLevel(
  file: string,
  wanted: Set<string>,
  maxBytes = 256 * 1024,
): Promise<{ names: Set<string>; files: Map<string, string> }> {
  const names = new Set<string>();
  const files = new Map<string, string>();
  for await (const e of entriesOf(file)) {
    const parts = components(e.path);
    if (parts.length === 0) continue;
    names.add(parts[0]!);
    if (parts.length === 1 && wanted.has(parts[0]!) && e.type === 'File' && e.size <= maxBytes) {
      const chunks: Buffer[] = [];
      for await (const c of e) chunks.push(c as Buffer);
      files.set(parts[0]!, Buffer.concat(chunks).toString('utf8'));
    }
  }
  return { names, files };
}
