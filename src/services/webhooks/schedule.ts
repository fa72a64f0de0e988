/**
 * When a failed delivery is tried again (docs/webhooks.md). Eight attempts: at once,
 * then after 5 s, 5 min, 30 min, 2 h, 5 h, 10 h and 10 h (about 28 hours in all); after
 * the eighth failure the delivery is failed. `scale` (PIER_WEBHOOK_RETRY_SCALE) shrinks
 * the delays for tests. A `Retry-After` from the endpoint (seconds or an HTTP date)
 * pushes the next attempt later, never earlier, and at most MAX_RETRY_AFTER_MS away.
 */

/** Delay before attempt n+1 after attempt n failed (index n-1). */
export const RETRY_DELAYS_MS = [
  5_000,
  5 * 60_000,
  30 * 60_000,
  2 * 3_600_000,
  5 * 3_600_000,
  10 * 3_600_000,
  10 * 3_600_000,
] as const;

export const MAX_ATTEMPTS = RETRY_DELAYS_MS.length + 1;

/** An endpoint cannot push a retry further than the schedule's longest step. */
export const MAX_RETRY_AFTER_MS = 10 * 3_600_000;

/**
 * Milliseconds until the next attempt after attempt `attempt` (1-based) failed, or
 * undefined when that was the last one.
 */
export function retryDelayMs(
  attempt: number,
  scale: number,
  retryAfterMs?: number,
): number | undefined {
  const base = RETRY_DELAYS_MS[attempt - 1];
  if (base === undefined) return undefined;
  const scheduled = Math.round(base * scale);
  if (retryAfterMs === undefined) return scheduled;
  return Math.max(scheduled, Math.min(retryAfterMs, MAX_RETRY_AFTER_MS));
}

/** `Retry-After` as milliseconds from `now`: delta-seconds or an HTTP date; else undefined. */
export function parseRetryAfter(value: string | null, now: number): number | undefined {
  if (!value) return undefined;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}
