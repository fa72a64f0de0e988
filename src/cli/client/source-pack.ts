/**
 * Packing a directory for `pier deploy`: which entries go (the ignore files of
 * ignore-rules.ts, never `.git`, always the Dockerfile), and the gzip'd tar of them,
 * written to a temporary file while it is hashed. The file, not memory, holds the
 * archive: the upload then streams it with a known length (the server refuses an
 * oversized one before a byte is sent) and an exact progress bar.
 */
import { createHash } from 'node:crypto';
import { createWriteStream, rmSync } from 'node:fs';
import { mkdtemp, readFile, readdir, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { create } from 'tar';
import { CliError } from './errors.js';
import { IgnoreRules } from './ignore-rules.js';

/** What goes into the archive. */
export interface SourceListing {
  /** Paths relative to the directory, `/`-separated, parents before children. */
  entries: string[];
  /** The ignore file that decided (`.dockerignore`, `.gitignore`), if any. */
  ignoreFile?: string;
  /** Entries that cannot go in an archive (sockets, FIFOs, devices). */
  unsupported: string[];
}

/** A packed source waiting in a temporary file. */
export interface PackedSource extends SourceListing {
  file: string;
  size: number;
  sha256: string;
  /** Removes the temporary file (idempotent). */
  remove(): Promise<void>;
}

/**
 * Lists what `pier deploy` sends from `dir`: `.dockerignore` if there is one, else the
 * `.gitignore` files, decide; `.git` never goes; `keep` (the Dockerfile) always does.
 */
export async function listSource(dir: string, keep: string[] = []): Promise<SourceListing> {
  const top = await readIgnoreFile(dir, '.dockerignore');
  const rules = new IgnoreRules(top === undefined ? 'git' : 'docker');
  if (top !== undefined) rules.add(top);
  const listing: SourceListing = {
    entries: [],
    unsupported: [],
    ignoreFile: top === undefined ? undefined : '.dockerignore',
  };
  const kept = new Set(keep.map((k) => k.split(path.sep).join('/')));

  const walk = async (rel: string): Promise<void> => {
    const abs = path.join(dir, rel);
    if (rules.flavour === 'git') {
      const text = await readIgnoreFile(abs, '.gitignore');
      if (text !== undefined) {
        rules.add(text, rel);
        listing.ignoreFile ??= '.gitignore';
      }
    }
    const children = await readdir(abs, { withFileTypes: true }).catch((err: unknown) => {
      throw unreadable(abs, err);
    });
    children.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const child of children) {
      if (child.name === '.git') continue;
      const childRel = rel === '' ? child.name : `${rel}/${child.name}`;
      const isDir = child.isDirectory();
      if (!isDir && !child.isFile() && !child.isSymbolicLink()) {
        if (!rules.ignores(childRel, false)) listing.unsupported.push(childRel);
        continue;
      }
      const ignored = rules.ignores(childRel, isDir) && !kept.has(childRel);
      if (!isDir) {
        if (!ignored) listing.entries.push(childRel);
        continue;
      }
      if (!ignored) listing.entries.push(childRel);
      // Inside an ignored directory: git never looks again; Docker does when a `!`
      // pattern may bring something back; a kept file is looked for either way.
      const lookInside =
        !ignored ||
        (rules.flavour === 'docker' && rules.hasNegations) ||
        [...kept].some((k) => k.startsWith(`${childRel}/`));
      if (lookInside) await walk(childRel);
    }
  };
  await walk('');
  return listing;
}

/** Packs `dir` (see `listSource`) into a gzip'd tar in a temporary file. */
export async function packSource(dir: string, keep: string[] = []): Promise<PackedSource> {
  const info = await stat(dir).catch((err: unknown) => {
    throw unreadable(dir, err);
  });
  if (!info.isDirectory()) throw new CliError(`${dir} is not a directory`);
  const listing = await listSource(dir, keep);
  const tmpDir = await mkdtemp(path.join(os.tmpdir(), 'pier-deploy-'));
  const file = path.join(tmpDir, 'source.tar.gz');
  // An interrupted deploy leaves no archive behind; the listener must then exit itself.
  const onSignal = (signal: NodeJS.Signals) => {
    rmSync(tmpDir, { recursive: true, force: true });
    process.exit(signal === 'SIGINT' ? 130 : 143);
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  const remove = async () => {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await rm(tmpDir, { recursive: true, force: true });
  };
  const hash = createHash('sha256');
  let size = 0;
  const counter = new Transform({
    transform(chunk: Buffer, _enc, done) {
      hash.update(chunk);
      size += chunk.length;
      done(null, chunk);
    },
  });
  try {
    // Each directory is listed with its entries, so tar must not add what is under it.
    // `portable` leaves out the packer's user and group names and ids.
    const pack = create(
      { gzip: true, cwd: dir, portable: true, noDirRecurse: true, follow: false },
      listing.entries,
    );
    await pipeline(pack, counter, createWriteStream(file, { flags: 'wx', mode: 0o600 }));
  } catch (err) {
    await remove();
    throw err instanceof CliError ? err : unreadable(dir, err);
  }
  return { ...listing, file, size, sha256: hash.digest('hex'), remove };
}

async function readIgnoreFile(dir: string, name: string): Promise<string | undefined> {
  try {
    return await readFile(path.join(dir, name), 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR' || code === 'EISDIR') return undefined;
    throw unreadable(path.join(dir, name), err);
  }
}

function unreadable(what: string, err: unknown): CliError {
  const e = err as NodeJS.ErrnoException;
  return new CliError(`cannot read ${what}: ${e.code ?? e.message}`);
}
