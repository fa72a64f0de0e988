/**
 * One push of an app at a time, from its hook deciding to its refs moving: a second
 * push's hook waits here, so it sees the branch as the first one left it (and is refused
 * if it was made against the old one) instead of deploying a tree that would then fail
 * to land. The lock is this process's: the repositories are on this host's disk.
 */
const tails = new Map<string, Promise<void>>();

/** Whether a push of `appId` holds (or waits for) the lock now. */
export function pushLocked(appId: string): boolean {
  return tails.has(appId);
}

/** Waits for the lock of `appId`; answers its release (idempotent). */
export async function lockPush(appId: string): Promise<() => void> {
  const before = tails.get(appId) ?? Promise.resolve();
  let release!: () => void;
  const mine = new Promise<void>((resolve) => (release = resolve));
  const tail = before.then(() => mine);
  tails.set(appId, tail);
  await before;
  return () => {
    release();
    if (tails.get(appId) === tail) tails.delete(appId);
  };
}
