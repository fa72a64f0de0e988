/**
 * A periodic background task of the platform (sleep policies, supervision, checkpoints,
 * liveness, upkeep, the orphan sweep): run every `everyMs`, never two runs at once (a slow
 * run makes the next ones wait, not pile up), a failure logged and the next run tried as
 * usual. The first run comes after `firstAfterMs` (default: `everyMs`). The timers do not
 * keep the process alive. Returns a stopper.
 */
export function everyInterval(
  log: { warn(obj: object, msg: string): void },
  what: string,
  everyMs: number,
  tick: () => Promise<unknown>,
  firstAfterMs = everyMs,
): () => void {
  let running = false;
  const run = () => {
    if (running) return;
    running = true;
    tick()
      .catch((err: unknown) => log.warn({ err }, `${what} failed`))
      .finally(() => (running = false));
  };
  let timer: NodeJS.Timeout | undefined;
  const first = setTimeout(() => {
    run();
    timer = setInterval(run, everyMs);
    timer.unref();
  }, firstAfterMs);
  first.unref();
  return () => {
    clearTimeout(first);
    clearInterval(timer);
  };
}
