/**
 * Hashing of object bodies, on worker threads when they are large.
 *
 * Every byte of an upload is hashed: MD5 for the ETag, and SHA-256 and CRC32 when the
 * client signed or checksummed the body. That is a few milliseconds of CPU per megabyte,
 * enough to make the event loop, which also receives the bytes and serves every other
 * request, the bottleneck of large uploads. Bodies of at least {@link OFFLOAD_MIN_BYTES}
 * (or of unknown size) are therefore hashed on a small pool of worker threads: the main
 * thread posts the pieces in batches of about {@link BATCH_BYTES}, and the worker answers
 * the digests at the end. Small bodies are hashed inline, where a message round trip would
 * cost more than the hashing.
 *
 * The pieces are posted as they are (structured clone, a plain memcpy into the message),
 * not copied into buffers of our own. Measured with 16 streams of 64 MiB: batches copied
 * into slots of a SharedArrayBuffer cost ~20 % more CPU per MB (V8 copies into shared
 * memory with a slow tear-free memmove), and a new or transferred buffer per batch is
 * external memory that V8 answers with a full GC every few dozen megabytes.
 *
 * Workers start with the first large body and exit after {@link IDLE_EXIT_MS} without one,
 * so an idle pier does not keep their memory.
 */
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { DigestReply, DigestRequest } from './digest-protocol.js';
import { DigestSet, type DigestAlgorithm, type Digests } from './running.js';

/** Bodies at least this large, or of unknown size, are hashed on a worker. */
export const OFFLOAD_MIN_BYTES = 256 * 1024;
/** Bytes per message to a worker: few messages, and pieces not held long. */
const BATCH_BYTES = 256 * 1024;
/** A worker without a task for this long exits. */
const IDLE_EXIT_MS = 30_000;
/** Two workers already keep a 2-core machine busy alongside the event loop. */
const MAX_WORKERS = Math.max(1, Math.min(4, os.availableParallelism()));

/** The digests of one body, fed piece by piece. */
export interface DigestTask {
  /** Feeds the next piece of the body. */
  update(chunk: Uint8Array): void;
  /** Every piece is in: the digests. Rejects if the worker failed. */
  finish(): Promise<Digests>;
  /** The body was abandoned: forget it. */
  abort(): void;
}

class InlineTask implements DigestTask {
  private readonly set: DigestSet;

  constructor(algorithms: DigestAlgorithm[]) {
    this.set = new DigestSet(algorithms);
  }

  update(chunk: Uint8Array): void {
    this.set.update(chunk);
  }

  finish(): Promise<Digests> {
    return Promise.resolve(this.set.digests());
  }

  abort(): void {}
}

/** tsx's ESM API (its `import` export, which require.resolve would not answer). */
function tsxApi(): string {
  const require = createRequire(import.meta.url);
  const manifest = require.resolve('tsx/package.json');
  const pkg = require(manifest) as { exports: Record<string, { import: { default: string } }> };
  return pathToFileURL(path.join(path.dirname(manifest), pkg.exports['./esm/api']!.import.default))
    .href;
}

/**
 * The worker: the compiled digest-worker.js beside this file; or, when pier runs from its
 * sources (tests, benchmarks), the .ts through tsx, which a worker must register itself.
 */
function startWorker(): Worker {
  if (!import.meta.url.endsWith('.ts'))
    return new Worker(new URL('./digest-worker.js', import.meta.url));
  const entry = new URL('./digest-worker.ts', import.meta.url).href;
  const boot = `import(${JSON.stringify(tsxApi())}).then((tsx) => { tsx.register(); return import(${JSON.stringify(entry)}); });`;
  return new Worker(boot, { eval: true });
}

interface Waiter {
  resolve(d: Digests): void;
  reject(err: Error): void;
}

/** One worker thread and the tasks it holds. */
class DigestThread {
  private readonly worker: Worker;
  private readonly waiting = new Map<number, Waiter>();
  /** Tasks opened and not yet finished or aborted. */
  active = 0;
  private idleTimer: NodeJS.Timeout | undefined;
  private gone = false;

  constructor(private readonly onGone: (thread: DigestThread) => void) {
    this.worker = startWorker();
    this.worker.on('message', (reply: DigestReply) => this.answer(reply));
    this.worker.on('error', (err) => this.fail(err));
    this.worker.on('exit', (code) => this.fail(new Error(`the digest worker exited (${code})`)));
    // Referenced only while it holds a task: an idle worker never keeps the process up.
    // (After the listeners, since adding a 'message' listener references its port again.)
    this.worker.unref();
  }

  send(msg: DigestRequest): void {
    if (!this.gone) this.worker.postMessage(msg);
  }

  open(id: number, algorithms: DigestAlgorithm[]): void {
    clearTimeout(this.idleTimer);
    if (this.active++ === 0) this.worker.ref();
    this.send({ op: 'open', id, algorithms });
  }

  end(id: number): Promise<Digests> {
    if (this.gone) return Promise.reject(new Error('the digest worker is gone'));
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      this.send({ op: 'end', id });
    });
  }

  /** The task is over, with its answer or abandoned. */
  release(): void {
    this.active--;
    if (this.active > 0 || this.gone) return;
    this.worker.unref();
    this.idleTimer = setTimeout(() => void this.worker.terminate(), IDLE_EXIT_MS).unref();
  }

  private answer(reply: DigestReply): void {
    const waiter = this.waiting.get(reply.id);
    this.waiting.delete(reply.id);
    if (!waiter) return;
    if (reply.op === 'failed') waiter.reject(new Error(reply.error));
    else waiter.resolve(new Map(reply.digests.map(([a, d]) => [a, Buffer.from(d)])));
  }

  /** Ends the worker now; its tasks fail. */
  async stop(): Promise<void> {
    await this.worker.terminate();
  }

  private fail(err: Error): void {
    if (this.gone) return;
    this.gone = true;
    clearTimeout(this.idleTimer);
    this.onGone(this);
    for (const waiter of this.waiting.values()) waiter.reject(err);
    this.waiting.clear();
  }
}

/** A body hashed on a worker: its pieces go over in batches. */
class WorkerTask implements DigestTask {
  private batch: Uint8Array[] = [];
  private batchBytes = 0;
  private done = false;

  constructor(
    private readonly thread: DigestThread,
    private readonly id: number,
    algorithms: DigestAlgorithm[],
  ) {
    thread.open(id, algorithms);
  }

  update(chunk: Uint8Array): void {
    // A view on part of a larger buffer would post the whole buffer: copy just the view.
    const own = chunk.byteLength === chunk.buffer.byteLength ? chunk : new Uint8Array(chunk);
    this.batch.push(own);
    this.batchBytes += own.byteLength;
    if (this.batchBytes >= BATCH_BYTES) this.flush();
  }

  finish(): Promise<Digests> {
    this.flush();
    this.done = true;
    const answer = this.thread.end(this.id);
    const release = () => this.thread.release();
    answer.then(release, release);
    return answer;
  }

  abort(): void {
    if (this.done) return;
    this.done = true;
    this.batch = [];
    this.thread.send({ op: 'drop', id: this.id });
    this.thread.release();
  }

  private flush(): void {
    if (this.batch.length === 0) return;
    this.thread.send({ op: 'data', id: this.id, chunks: this.batch });
    this.batch = [];
    this.batchBytes = 0;
  }
}

/** The worker threads, started on demand. */
class DigestPool {
  private readonly threads: DigestThread[] = [];
  private nextId = 1;

  /** What tests look at: the workers running. */
  state(): { workers: number } {
    return { workers: this.threads.length };
  }

  /** Ends every worker (their tasks fail); the next large body starts new ones. */
  async stop(): Promise<void> {
    await Promise.all(this.threads.map((t) => t.stop()));
  }

  task(algorithms: DigestAlgorithm[]): DigestTask {
    return new WorkerTask(this.pick(), this.nextId++, algorithms);
  }

  /** The least busy thread, or a new one while all are busy and there is room. */
  private pick(): DigestThread {
    let best: DigestThread | undefined;
    for (const t of this.threads) if (!best || t.active < best.active) best = t;
    if (best && (best.active === 0 || this.threads.length >= MAX_WORKERS)) return best;
    const thread = new DigestThread((gone) => {
      const i = this.threads.indexOf(gone);
      if (i >= 0) this.threads.splice(i, 1);
    });
    this.threads.push(thread);
    return thread;
  }
}

const pool = new DigestPool();

/**
 * Starts hashing a body with every algorithm in `algorithms`: on a worker thread when
 * `sizeHint` is at least {@link OFFLOAD_MIN_BYTES} or unknown, inline otherwise (and when
 * there is no algorithm at all).
 */
export function startDigests(algorithms: DigestAlgorithm[], sizeHint?: number): DigestTask {
  const unique = [...new Set(algorithms)];
  // Nothing to hash (an unsigned body without checksums) costs nothing inline.
  const small = sizeHint !== undefined && sizeHint < OFFLOAD_MIN_BYTES;
  if (small || unique.length === 0) return new InlineTask(unique);
  return pool.task(unique);
}

/** The pool's workers (for tests). */
export function digestPoolState(): { workers: number } {
  return pool.state();
}

/** Ends the digest workers: tasks in progress fail, later ones start new workers. */
export function stopDigestWorkers(): Promise<void> {
  return pool.stop();
}
