/**
 * Blobs as files in the data dir, the default store. Layout:
 *
 *   <root>/<ns>/<first two chars of id>/<id>   the blobs (the two-char level keeps
 *                                              directories small in big buckets)
 *   <root>/.tmp/<random>                       writes in progress, and namespaces being
 *                                              removed
 *
 * A write streams into a temp file on the same filesystem, is fsynced, verified, and only
 * then renamed over its final name: rename is atomic, so a reader sees the old blob or the
 * whole new one, never a part, and a crash leaves at worst a temp file, which
 * {@link sweepTemp} removes on the next start.
 */
import { randomUUID } from 'node:crypto';
import type { Dir } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { lstat, mkdir, open, opendir, readdir, rename, rm, stat, unlink } from 'node:fs/promises';
import path from 'node:path';
import { Readable, type Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import {
  BLOB_NAME,
  BlobError,
  assertBlobName,
  assertRange,
  type BlobPutOptions,
  type BlobRange,
  type BlobStore,
  type BlobWriteResult,
} from './blob-store.js';
import { DigestMeter } from './digest-meter.js';
import { fsyncDir, mkdirDurable } from './durable-fs.js';
import { errorMessage, watchFailureOrigin, writeFailure } from './stream-failure.js';

/**
 * Streams move 128 KiB at a time: fewer syscalls and callbacks than the 64 KiB default, yet
 * little held per stream. Buffers that wait long (1 MiB per stream with 16 streams) outlive
 * V8's young-generation collections, are promoted, and then cost a full GC each few dozen
 * megabytes: with 1 MiB, a 16-stream benchmark ran three times as many full GCs.
 */
const IO_CHUNK = 128 * 1024;
const TEMP_DIR = '.tmp';
/** How old a temp file must be before `open` treats it as a crash's leftover. */
const STALE_TEMP_MS = 60 * 60 * 1000;

function isErrno(err: unknown, code: string): boolean {
  return (err as NodeJS.ErrnoException | undefined)?.code === code;
}

function backend(what: string, err: unknown): BlobError {
  return new BlobError('backend', `${what}: ${errorMessage(err)}`, { cause: err });
}

/** Resolves once a stream has closed (and so released its file descriptor). */
function closed(stream: Writable): Promise<void> {
  if (stream.closed) return Promise.resolve();
  return new Promise((resolve) => {
    stream.once('close', () => resolve());
    stream.destroy();
  });
}

/**
 * Removes what sits in `<root>/.tmp` and was last modified before `olderThan`: temp files
 * of writes that a crash interrupted, and namespaces whose removal it interrupted. A write
 * touches its temp file with every chunk, so only writes stalled for that long are at risk;
 * use a cutoff far longer than any pause a live upload can survive. Returns how many
 * entries it removed.
 */
export async function sweepTemp(root: string, olderThan: Date): Promise<number> {
  const dir = path.join(path.resolve(root), TEMP_DIR);
  let names: string[];
  try {
    names = await readdir(dir);
  } catch (err) {
    if (isErrno(err, 'ENOENT')) return 0;
    throw backend('sweeping temp files', err);
  }
  let removed = 0;
  for (const name of names) {
    const entry = path.join(dir, name);
    const info = await lstat(entry).catch(() => undefined); // gone already: a write finished
    if (!info || info.mtimeMs >= olderThan.getTime()) continue;
    await rm(entry, { recursive: true, force: true });
    removed++;
  }
  return removed;
}

/** The filesystem blob store; see the module comment for the layout. */
export class FsBlobStore implements BlobStore {
  readonly kind = 'fs' as const;
  /** Absolute path of the store's root directory. */
  readonly root: string;
  private readonly tempDir: string;
  private tempReady: Promise<unknown> | undefined;

  /** A store under `root` (e.g. DATA_DIR/objects); prefer {@link FsBlobStore.open}. */
  constructor(root: string) {
    this.root = path.resolve(root);
    this.tempDir = path.join(this.root, TEMP_DIR);
  }

  /**
   * Opens the store under `root`: creates it (mode 0700) when missing and removes temp
   * files that a crash left behind, that is, older than an hour.
   */
  static async open(root: string): Promise<FsBlobStore> {
    const store = new FsBlobStore(root);
    try {
      await mkdir(store.root, { recursive: true, mode: 0o700 });
      await store.ensureTempDir();
    } catch (err) {
      throw err instanceof BlobError ? err : backend(`creating ${store.root}`, err);
    }
    await sweepTemp(store.root, new Date(Date.now() - STALE_TEMP_MS));
    return store;
  }

  /** Where the blob (ns, id) lives; throws BlobError 'invalid-id' for a bad name. */
  pathOf(ns: string, id: string): string {
    assertBlobName(ns, 'namespace');
    assertBlobName(id);
    return path.join(this.root, ns, id.slice(0, 2), id);
  }

  async put(
    ns: string,
    id: string,
    body: Readable,
    opts: BlobPutOptions = {},
  ): Promise<BlobWriteResult> {
    let target: string;
    try {
      target = this.pathOf(ns, id);
    } catch (err) {
      body.destroy(); // the store owns the body once called: it is read to its end or destroyed
      throw err;
    }
    const meter = new DigestMeter({
      sha256: opts.sha256,
      maxBytes: opts.maxBytes,
      sizeHint: opts.sizeHint,
      highWaterMark: IO_CHUNK,
    });
    return this.writeAtomically(target, body, meter, opts.verify);
  }

  async get(ns: string, id: string, range?: BlobRange): Promise<Readable> {
    const file = this.pathOf(ns, id);
    if (range) assertRange(range);
    let handle: FileHandle;
    try {
      // Opening first (not a lazy createReadStream(path)) makes a missing blob reject here,
      // and pins the file: an overwrite or delete meanwhile cannot change what is read.
      handle = await open(file, 'r');
    } catch (err) {
      if (isErrno(err, 'ENOENT')) throw new BlobError('not-found', `no blob ${ns}/${id}`);
      throw backend(`opening blob ${ns}/${id}`, err);
    }
    // Read buffers are sized to what is read: a 1 KiB object must not cost a 1 MiB buffer.
    const length = range ? range.end - range.start + 1 : IO_CHUNK;
    return handle.createReadStream({
      start: range?.start,
      end: range?.end,
      highWaterMark: Math.min(IO_CHUNK, Math.max(length, 1)),
    });
  }

  async stat(ns: string, id: string): Promise<{ size: number } | undefined> {
    const file = this.pathOf(ns, id);
    try {
      return { size: (await stat(file)).size };
    } catch (err) {
      if (isErrno(err, 'ENOENT')) return undefined;
      throw backend(`stat of blob ${ns}/${id}`, err);
    }
  }

  async delete(ns: string, id: string): Promise<void> {
    const file = this.pathOf(ns, id);
    try {
      // No directory fsync: a delete that a power cut undoes brings back an unreferenced
      // blob, which the orphan sweep (listOlderThan) removes again.
      await unlink(file);
    } catch (err) {
      if (!isErrno(err, 'ENOENT')) throw backend(`deleting blob ${ns}/${id}`, err);
    }
  }

  async concat(ns: string, id: string, parts: string[]): Promise<BlobWriteResult> {
    const target = this.pathOf(ns, id);
    const files = parts.map((part) => this.pathOf(ns, part));
    async function* bytes(): AsyncGenerator<Buffer> {
      for (const [i, file] of files.entries()) {
        let handle: FileHandle;
        try {
          handle = await open(file, 'r');
        } catch (err) {
          if (isErrno(err, 'ENOENT')) {
            throw new BlobError('not-found', `no blob ${ns}/${parts[i]} to concatenate`);
          }
          throw backend(`opening blob ${ns}/${parts[i]}`, err);
        }
        try {
          yield* handle.createReadStream({ highWaterMark: IO_CHUNK }) as AsyncIterable<Buffer>;
        } catch (err) {
          throw backend(`reading blob ${ns}/${parts[i]}`, err);
        }
      }
    }
    const source = Readable.from(bytes(), { objectMode: false, highWaterMark: IO_CHUNK });
    return this.writeAtomically(target, source, new DigestMeter({ highWaterMark: IO_CHUNK }));
  }

  async deleteNamespace(ns: string): Promise<void> {
    assertBlobName(ns, 'namespace');
    await this.ensureTempDir();
    // Renaming the directory away first makes the namespace vanish at once, and leaves a
    // crash mid-removal with only a temp entry that sweepTemp finishes off.
    const trash = path.join(this.tempDir, `trash-${ns}-${randomUUID()}`);
    try {
      await rename(path.join(this.root, ns), trash);
    } catch (err) {
      if (isErrno(err, 'ENOENT')) return;
      throw backend(`removing namespace ${ns}`, err);
    }
    try {
      await rm(trash, { recursive: true, force: true });
    } catch (err) {
      throw backend(`removing namespace ${ns}`, err);
    }
  }

  async *listOlderThan(ns: string, olderThan: Date): AsyncIterable<string> {
    assertBlobName(ns, 'namespace');
    const nsDir = path.join(this.root, ns);
    const cutoff = olderThan.getTime();
    const shards = await opendirIfExists(nsDir);
    if (!shards) return;
    for await (const shard of shards) {
      if (!shard.isDirectory()) continue;
      const shardDir = path.join(nsDir, shard.name);
      const entries = await opendirIfExists(shardDir);
      if (!entries) continue;
      for await (const entry of entries) {
        if (!entry.isFile() || !BLOB_NAME.test(entry.name)) continue;
        // mtime is when the last byte was written: rename keeps it, so it is the blob's age.
        const info = await stat(path.join(shardDir, entry.name)).catch(() => undefined);
        if (info && info.mtimeMs < cutoff) yield entry.name;
      }
    }
  }

  sweepTemp(olderThan: Date): Promise<number> {
    return sweepTemp(this.root, olderThan);
  }

  /**
   * Streams `source` through `meter` into a temp file, fsyncs it, lets `verify` see the
   * digests, and renames it to `target`. On any failure the temp file is removed and
   * nothing changes at `target`.
   */
  private async writeAtomically(
    target: string,
    source: Readable,
    meter: DigestMeter,
    verify?: (result: BlobWriteResult) => void,
  ): Promise<BlobWriteResult> {
    const temp = path.join(this.tempDir, randomUUID());
    let handle: FileHandle;
    try {
      await this.ensureTempDir();
      handle = await open(temp, 'wx', 0o600);
    } catch (err) {
      source.destroy();
      throw backend('creating a temp file', err);
    }
    // flush: the stream fsyncs the file before closing it, and pipeline waits for the
    // close, so the bytes are on disk before verify and rename.
    const sink = handle.createWriteStream({ highWaterMark: IO_CHUNK, flush: true });
    const origin = watchFailureOrigin(source, sink);
    try {
      try {
        await pipeline(source, meter, sink);
      } catch (err) {
        throw writeFailure(err, origin, 'writing a blob');
      }
      const result = meter.result();
      verify?.(result); // what it throws goes to the caller as it is
      const dir = path.dirname(target);
      try {
        await mkdirDurable(dir);
        await rename(temp, target);
        await fsyncDir(dir);
      } catch (err) {
        throw backend('storing a blob', err);
      }
      return result;
    } catch (err) {
      await closed(sink);
      await rm(temp, { force: true }).catch(() => {}); // sweepTemp gets it if this fails too
      throw err;
    }
  }

  private ensureTempDir(): Promise<unknown> {
    this.tempReady ??= mkdir(this.tempDir, { recursive: true, mode: 0o700 }).catch((err) => {
      this.tempReady = undefined; // try again next time, e.g. once the disk is mounted
      throw err;
    });
    return this.tempReady;
  }
}

async function opendirIfExists(dir: string): Promise<Dir | undefined> {
  try {
    return await opendir(dir);
  } catch (err) {
    if (isErrno(err, 'ENOENT') || isErrno(err, 'ENOTDIR')) return undefined;
    throw backend(`listing ${dir}`, err);
  }
}
