/**
 * Independent steps of a start, run at once: a start is mostly waiting on spawned tools
 * and the kernel, so steps that do not need each other overlap. Unlike Promise.all, it
 * waits for every step to end before it throws, so nothing of a failed start still runs
 * behind the error (and its cleanup, or a retry, never races a step).
 */
export async function together<T extends readonly unknown[]>(steps: {
  [K in keyof T]: Promise<T[K]>;
}): Promise<T> {
  const results = await Promise.allSettled(steps);
  const failed = results.find((r) => r.status === 'rejected');
  if (failed) throw failed.reason;
  return results.map((r) => (r as PromiseFulfilledResult<unknown>).value) as unknown as T;
}
