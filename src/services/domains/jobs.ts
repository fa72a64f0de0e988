/**
 * Durable jobs of the edge, and the sweep that queues them when a row's `next_check_at`
 * has come (retries after a failure, renewals before expiry); it also ends the claims
 * left unproven for UNPROVEN_CLAIM_MS (claims.ts). One job per row at a time
 * (the row's id is the dedupe key); a crash mid-check leaves the job to another worker.
 */
import { z } from 'zod';
import { sql } from 'kysely';
import { defineJob, exponentialBackoff } from '../../jobs/catalogue.js';
import { enqueue } from '../../jobs/queue.js';
import { everyInterval } from '../ticker.js';
import type { ServiceContext } from '../context.js';
import { runDomainCheck } from './checks.js';
import { endExpiredClaims } from './claims.js';
import { DOMAIN_CHECK_JOB } from './domains.js';
import { runZoneCheck } from './zone-checks.js';
import { ZONE_CHECK_JOB } from './zones.js';

export const EDGE_SWEEP_MS = 5000;

export function edgeJobs(get: () => ServiceContext) {
  return [
    defineJob({
      kind: DOMAIN_CHECK_JOB,
      payload: z.object({ domainId: z.string() }),
      maxAttempts: 5,
      backoffMs: exponentialBackoff(2000),
      async run({ domainId }) {
        await runDomainCheck(get(), domainId);
      },
    }),
    defineJob({
      kind: ZONE_CHECK_JOB,
      payload: z.object({ zoneId: z.string() }),
      maxAttempts: 5,
      backoffMs: exponentialBackoff(2000),
      async run({ zoneId }) {
        await runZoneCheck(get(), zoneId);
      },
    }),
  ];
}

/** Ends the claims unproven for too long, and queues the checks whose time has come. */
export async function sweepEdgeChecks(ctx: ServiceContext): Promise<void> {
  await ctx.db.transaction().execute(async (tx) => {
    await endExpiredClaims(tx);
    const due = await tx
      .updateTable('edge_domains')
      .set({ next_check_at: null })
      .where('next_check_at', '<=', sql<Date>`now()`)
      .returning('id')
      .execute();
    for (const { id } of due)
      await enqueue(tx, ctx.jobs, DOMAIN_CHECK_JOB, { domainId: id }, { dedupeKey: id });
    const dueZones = await tx
      .updateTable('edge_zones')
      .set({ next_check_at: null })
      .where('next_check_at', '<=', sql<Date>`now()`)
      .returning('id')
      .execute();
    for (const { id } of dueZones)
      await enqueue(tx, ctx.jobs, ZONE_CHECK_JOB, { zoneId: id }, { dedupeKey: id });
  });
}

export function scheduleEdgeChecks(ctx: ServiceContext): () => void {
  return everyInterval(ctx.log, 'the edge check sweep', EDGE_SWEEP_MS, () => sweepEdgeChecks(ctx));
}
