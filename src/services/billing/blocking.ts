/**
 * Whether an organization's credit is blocked (spec 3, 7.1: credit at zero). Read from
 * the row on every check, not from a cache: a grant that lifts the block counts from the
 * moment it commits, on every replica. An organization without a credit account (not
 * prepaid) is never blocked.
 */
import { ApiError } from '../../errors/api-error.js';
import type { Executor } from '../../store/db.js';

export async function creditBlocked(ex: Executor, orgId: string): Promise<boolean> {
  const row = await ex
    .selectFrom('credit_accounts')
    .select('blocked_at')
    .where('org_id', '=', orgId)
    .executeTakeFirst();
  return row?.blocked_at != null;
}

export function creditBlockedError(): ApiError {
  return new ApiError(
    'credit-blocked',
    'The credit of this organization is at zero: only reads, stops and billing routes pass. Add credit to go on.',
  );
}

/** Nothing starts for a blocked organization: machine starts and wakes call this first. */
export async function assertCreditOpen(ex: Executor, orgId: string): Promise<void> {
  if (await creditBlocked(ex, orgId)) throw creditBlockedError();
}
