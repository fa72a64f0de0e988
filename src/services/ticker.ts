/**
 * A periodic background task of the platform (sleep policies, supervision, checkpoints,
 * liveness, upkeep): run every `everyMs`, never two runs at once (a slow run makes the
 * next ones wait, not pile up), a failure logged and the next run tried as usual. The
 * timer does not keep the process alive. Returns a stopper.
 */
export function everyInterval(
  log: { warn(obj: object, msg: string): void },
  what: string,
  everyMs: number,
  tick: () => Promise<unknown>,
): () => void {
  let running = false;
  const timer = setInterval(() => {
    if (running) return;
    running = true;
    tick()
      .catch((err: unknown) => log.warn({ err }, `${what} failed`))
      .finally(() => (running = false));
  }, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}
