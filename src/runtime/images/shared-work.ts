/**
 * One piece of work per key, shared by everyone who asks for it while it runs: concurrent
 * pulls of one image make one download and one unpack. Each caller keeps its own
 * AbortSignal: a caller that gives up is answered at once with its signal's reason, and
 * the work itself is aborted only when every caller has given up (so one impatient caller
 * does not fail the others). Progress reports go to every caller still waiting.
 */

/** Options of one caller of {@link SharedWork.run}. */
export interface ShareOptions<P> {
  signal?: AbortSignal;
  onProgress?: (p: P) => void;
}

interface Job<T, P> {
  promise: Promise<T>;
  controller: AbortController;
  waiters: Set<ShareOptions<P>>;
}

/** Deduplicates concurrent work by key. */
export class SharedWork<T, P = never> {
  private readonly jobs = new Map<string, Job<T, P>>();

  /** Keys with work in progress. */
  keys(): string[] {
    return [...this.jobs.keys()];
  }

  /** Waits for the work under `key` if there is some (its outcome is ignored). */
  async settled(key: string): Promise<void> {
    await this.jobs.get(key)?.promise.catch(() => undefined);
  }

  /**
   * Runs `work` under `key`, or joins the run already in progress. `work` gets a signal
   * that aborts when all callers have left, and a progress function that fans out.
   */
  run(
    key: string,
    work: (signal: AbortSignal, progress: (p: P) => void) => Promise<T>,
    opts: ShareOptions<P> = {},
  ): Promise<T> {
    if (opts.signal?.aborted) return Promise.reject(opts.signal.reason);
    let job = this.jobs.get(key);
    if (!job) {
      const controller = new AbortController();
      const waiters = new Set<ShareOptions<P>>();
      const progress = (p: P) => {
        for (const w of waiters) w.onProgress?.(p);
      };
      const promise = Promise.resolve()
        .then(() => work(controller.signal, progress))
        .finally(() => {
          if (this.jobs.get(key) === created) this.jobs.delete(key);
        });
      // The job's own rejection is handled by each waiter; never let it go unhandled.
      promise.catch(() => undefined);
      const created: Job<T, P> = { promise, controller, waiters };
      job = created;
      this.jobs.set(key, created);
    }
    const joined = job;
    const waiter: ShareOptions<P> = { ...(opts.onProgress ? { onProgress: opts.onProgress } : {}) };
    joined.waiters.add(waiter);
    return new Promise<T>((resolve, reject) => {
      const leave = () => {
        joined.waiters.delete(waiter);
        opts.signal?.removeEventListener('abort', onAbort);
      };
      const onAbort = () => {
        leave();
        reject(opts.signal!.reason);
        if (joined.waiters.size === 0) {
          // Nobody wants it any more: stop it, and let a later caller start afresh.
          if (this.jobs.get(key) === joined) this.jobs.delete(key);
          joined.controller.abort(opts.signal!.reason);
        }
      };
      opts.signal?.addEventListener('abort', onAbort, { once: true });
      joined.promise.then(
        (v) => {
          leave();
          resolve(v);
        },
        (err: unknown) => {
          leave();
          reject(err);
        },
      );
    });
  }
}
