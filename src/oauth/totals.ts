/**
 * Bounds on what anyone may leave behind at the keyless OAuth entrances, in total: the
 * per-address limits (rate-windows.ts) slow one caller, but many addresses together could
 * still fill the tables. So at most OAUTH_TOTALS.unusedClients registered clients that no
 * person has approved yet, and OAUTH_TOTALS.pendingRequests consent requests still
 * pending, are kept; each new one forgets the oldest beyond the cap.
 *
 * Forgetting the oldest, rather than refusing new ones when full, keeps the entrances
 * open during a flood: a person's client that was registered (or a login started) a
 * moment ago is evicted only after the cap's worth of newer ones, and registering again
 * (or starting the login again) always works. Approved clients and decided requests are
 * never forgotten here.
 */
import type { Executor } from '../store/db.js';

/** The caps; read at each call. */
export const OAUTH_TOTALS = { unusedClients: 10_000, pendingRequests: 10_000 };

/** Forgets the oldest clients never approved beyond the cap. */
export async function capUnusedClients(ex: Executor, cap = OAUTH_TOTALS.unusedClients) {
  await ex
    .deleteFrom('oauth_clients')
    // Checked again on the row itself: a client approved meanwhile is kept.
    .where('used_at', 'is', null)
    .where('id', 'in', (q) =>
      q
        .selectFrom('oauth_clients')
        .select('id')
        .where('used_at', 'is', null)
        .orderBy('created_at', 'desc')
        .orderBy('id', 'desc')
        .offset(cap),
    )
    .execute();
}

/** Forgets the oldest pending consent requests beyond the cap (their page then answers 404). */
export async function capPendingRequests(ex: Executor, cap = OAUTH_TOTALS.pendingRequests) {
  await ex
    .deleteFrom('oauth_requests')
    .where('status', '=', 'pending')
    .where('id', 'in', (q) =>
      q
        .selectFrom('oauth_requests')
        .select('id')
        .where('status', '=', 'pending')
        .orderBy('created_at', 'desc')
        .orderBy('id', 'desc')
        .offset(cap),
    )
    .execute();
}
