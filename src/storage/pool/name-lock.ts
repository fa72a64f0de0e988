/**
 * Serializes operations on the same volume names within one process. The checks "does
 * the name exist" and "rename into place" are two steps, and rename(2) happily replaces an
 * empty directory, so two creates of one name must not interleave. One process owns a
 * pool (the data dir lock sees to that), so a lock in memory is enough.
 */
export class NameLocks {
  private readonly tails = new Map<string, Promise<void>>();

  /** Runs `fn` while holding the locks of all `names` (taken in sorted order: no deadlock). */
  async with<T>(names: string[], fn: () => Promise<T>): Promise<T> {
    const sorted = [...new Set(names)].sort();
    const releases: (() => void)[] = [];
    try {
      for (const name of sorted) releases.push(await this.acquire(name));
      return await fn();
    } finally {
      for (const release of releases.reverse()) release();
    }
  }

  private async acquire(name: string): Promise<() => void> {
    const previous = this.tails.get(name) ?? Promise.resolve();
    let release!: () => void;
    const mine = new Promise<void>((resolve) => (release = resolve));
    const tail = previous.then(() => mine);
    this.tails.set(name, tail);
    await previous;
    return () => {
      release();
      // Forget the name once nobody waits behind us, so the map does not grow forever.
      if (this.tails.get(name) === tail) this.tails.delete(name);
    };
  }
}
