/**
 * Serializes the engine's calls on one volume inside this process, so that a start and a
 * stop (or two starts) of the same instance never interleave and spawn twice.
 */
export class KeyedLock {
  private readonly tails = new Map<string, Promise<unknown>>();

  /** Runs `fn` after every earlier call with the same key has finished. */
  async with<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const before = this.tails.get(key) ?? Promise.resolve();
    const run = before.then(fn, fn);
    const tail = run.catch(() => undefined);
    this.tails.set(key, tail);
    try {
      return await run;
    } finally {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    }
  }
}
