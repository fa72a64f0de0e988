/**
 * Who holds a name: claims of custom domains and zones across organizations (issue 24).
 * A claim holds a name only once it is proven by DNS (`verified_at` set, and kept through
 * later failures); an unproven claim blocks nobody. The first organization to prove a
 * name gets it: its proof ends the other organizations' unproven claims that conflict
 * with it, and a claim whose check finds another organization's proof first ends itself.
 * An unproven claim also ends after UNPROVEN_CLAIM_MS. An ended claim keeps its row, in
 * status `error` with the reason in `error` and `ended_at` set, and is not checked again.
 *
 * Conflicts: a domain with the same domain, or a zone that covers it; a zone with a zone
 * at, above or below it, or a domain below it. Deciding and proving run under one
 * transaction-scoped advisory lock, so two proofs of conflicting names cannot both win.
 */
import { sql } from 'kysely';
import { isWithin } from '../../edge/names.js';
import type { Executor } from '../../store/db.js';

/** How long a claim may stay unproven: 7 days from its creation. */
export const UNPROVEN_CLAIM_MS = 7 * 86_400_000;

export type ClaimKind = 'domain' | 'zone';

export interface Claim {
  kind: ClaimKind;
  orgId: string;
  name: string;
}

/** Serializes claims and proofs of names (held until the caller's transaction ends). */
export async function lockClaims(tx: Executor): Promise<void> {
  await sql`SELECT pg_advisory_xact_lock(hashtext('pier.edge-claims'))`.execute(tx);
}

/** Whether a claim of `kind` on `name` and one of `otherKind` on `other` conflict. */
function conflicts(kind: ClaimKind, name: string, otherKind: ClaimKind, other: string): boolean {
  if (kind === 'domain' && otherKind === 'domain') return name === other;
  if (kind === 'domain') return isWithin(name, other);
  if (otherKind === 'domain') return isWithin(other, name);
  return isWithin(name, other) || isWithin(other, name);
}

/** Other organizations' claims, proven or not, with what conflicts with `claim`. */
async function othersConflicting(ex: Executor, claim: Claim, proven: boolean) {
  const found: { kind: ClaimKind; id: string; name: string }[] = [];
  for (const kind of ['domain', 'zone'] as const) {
    const table = kind === 'domain' ? 'edge_domains' : 'edge_zones';
    const column = kind === 'domain' ? 'domain' : 'zone';
    let query = ex
      .selectFrom(table)
      .select(['id', `${column} as name`])
      .where('org_id', '<>', claim.orgId);
    query = proven
      ? query.where('verified_at', 'is not', null)
      : query.where('verified_at', 'is', null).where('ended_at', 'is', null);
    for (const row of await query.execute())
      if (conflicts(claim.kind, claim.name, kind, row.name))
        found.push({ kind, id: row.id, name: row.name });
  }
  return found;
}

/** Why another organization's proof keeps `claim` from holding its name, if it does. */
export async function provenConflict(ex: Executor, claim: Claim): Promise<string | undefined> {
  const [first] = await othersConflicting(ex, claim, true);
  if (!first) return undefined;
  return first.kind === 'domain'
    ? `'${first.name}' is a domain another organization proved.`
    : `'${claim.name}' overlaps the zone '${first.name}', which another organization proved.`;
}

/** Ends a claim that will not be proven, with the reason; it is not checked again. */
export async function endClaim(ex: Executor, kind: ClaimKind, id: string, reason: string) {
  await ex
    .updateTable(kind === 'domain' ? 'edge_domains' : 'edge_zones')
    .set({ status: 'error', error: reason, ended_at: sql<Date>`now()`, next_check_at: null })
    .where('id', '=', id)
    .where('verified_at', 'is', null)
    .where('ended_at', 'is', null)
    .execute();
}

/** Ends the other organizations' unproven claims that `claim`, just proven, rules out. */
export async function endLosingClaims(ex: Executor, claim: Claim): Promise<void> {
  for (const loser of await othersConflicting(ex, claim, false))
    await endClaim(
      ex,
      loser.kind,
      loser.id,
      `Another organization proved ${claim.kind === 'zone' ? 'the zone' : 'the domain'} '${claim.name}' first; this claim has ended.`,
    );
}

/** Ends every claim still unproven UNPROVEN_CLAIM_MS after its creation. */
export async function endExpiredClaims(ex: Executor): Promise<void> {
  const reason = `Not proven within ${UNPROVEN_CLAIM_MS / 86_400_000} days of the claim; it has ended (delete it and claim the name again to start over).`;
  for (const table of ['edge_domains', 'edge_zones'] as const)
    await ex
      .updateTable(table)
      .set({ status: 'error', error: reason, ended_at: sql<Date>`now()`, next_check_at: null })
      .where('verified_at', 'is', null)
      .where('ended_at', 'is', null)
      .where('created_at', '<=', sql<Date>`now() - ${UNPROVEN_CLAIM_MS} * interval '1 millisecond'`)
      .execute();
}

/**
 * Records that `claim` (row `id`) passed its DNS proof, unless another organization
 * proved a conflicting name first (then the claim ends with that reason) or the claim
 * is gone or ended. `markProven` writes the proof on the row in the same transaction.
 * Answers whether the claim holds its name now.
 */
export async function proveClaim(
  db: Executor,
  claim: Claim & { id: string },
  markProven: (tx: Executor) => Promise<unknown>,
): Promise<boolean> {
  return db.transaction().execute(async (tx) => {
    await lockClaims(tx);
    const row = await tx
      .selectFrom(claim.kind === 'domain' ? 'edge_domains' : 'edge_zones')
      .select(['verified_at', 'ended_at'])
      .where('id', '=', claim.id)
      .executeTakeFirst();
    if (!row || row.ended_at) return false;
    if (!row.verified_at) {
      const taken = await provenConflict(tx, claim);
      if (taken) {
        await endClaim(tx, claim.kind, claim.id, `${taken} This claim has ended.`);
        return false;
      }
    }
    await markProven(tx);
    await endLosingClaims(tx, claim);
    return true;
  });
}
