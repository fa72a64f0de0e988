/**
 * The check of a zone (a durable job): the delegation `_acme-challenge.<zone>` CNAME
 * `<acmeLabel>.acme.<edge host>` and a name below the zone pointing at the edge, read
 * through the configured resolver; then the wildcard certificate `*.<zone>` (naming the
 * apex `<zone>` too) through DNS-01, answered by pier's own DNS (edge/acme-dns.ts).
 * Status machine: pending_dns → verified → cert_issued | error; the next check is written
 * on the row. The first proof goes through `proveClaim` (claims.ts): another
 * organization's earlier proof of an overlapping name ends the claim instead.
 */
import type { Executor } from '../../store/db.js';
import type { ServiceContext } from '../context.js';
import { keepCertificateOfOwner, obtainCertificate } from './certificates.js';
import { proveClaim } from './claims.js';
import { dnsLookup, pointsAtEdge, renewalAt, retryDelayMs } from './checks.js';
import { edgeChanged } from './hosts.js';
import { ACME_PREFIX, acmeTarget, edgeAddressOf, type ZoneRow } from './records.js';

/** A name below the zone that only its wildcard record can answer. */
const PROBE_LABEL = 'pier-edge-probe';

async function zoneDnsProblem(ctx: ServiceContext, row: ZoneRow): Promise<string | undefined> {
  const dns = dnsLookup(ctx);
  const target = acmeTarget(ctx.config, row.acme_label);
  if (!(await dns.cname(ACME_PREFIX + row.zone)).includes(target))
    return `${ACME_PREFIX}${row.zone} is not a CNAME to ${target}.`;
  if (!(await pointsAtEdge(ctx, dns, `${PROBE_LABEL}.${row.zone}`)))
    return `*.${row.zone} does not point at ${edgeAddressOf(ctx.config)}.`;
  return undefined;
}

export async function runZoneCheck(ctx: ServiceContext, zoneId: string): Promise<void> {
  const row = await ctx.db
    .selectFrom('edge_zones')
    .selectAll()
    .where('id', '=', zoneId)
    .executeTakeFirst();
  if (!row || row.ended_at) return;
  const now = ctx.clock();
  const attempts = row.attempts + 1;
  const update = (values: Record<string, unknown>, ex: Executor = ctx.db) =>
    ex
      .updateTable('edge_zones')
      .set({ attempts, last_checked_at: now, ...values })
      .where('id', '=', zoneId)
      .where('ended_at', 'is', null)
      .execute();
  const problem = await zoneDnsProblem(ctx, row).catch(
    (err: Error) => `DNS lookup failed: ${err.message}`,
  );
  if (problem) {
    await update({
      status: 'pending_dns',
      error: problem,
      next_check_at: new Date(now.getTime() + retryDelayMs(attempts)),
    });
    return;
  }
  const claim = { kind: 'zone' as const, id: zoneId, orgId: row.org_id, name: row.zone };
  const holds = await proveClaim(ctx.db, claim, (tx) =>
    update(
      { status: 'verified', error: null, verified_at: row.verified_at ?? now, next_check_at: null },
      tx,
    ),
  );
  if (!holds) return;
  await edgeChanged(ctx);
  try {
    // The apex too (the wildcard does not cover it), for an app that takes it as a custom
    // domain; both DNS-01 answers are TXT values of `_acme-challenge.<zone>`.
    const cert = await obtainCertificate(ctx, [`*.${row.zone}`, row.zone], ['dns-01']);
    // Released meanwhile: the certificate is not kept.
    await keepCertificateOfOwner(
      ctx,
      { table: 'edge_zones', id: zoneId },
      `*.${row.zone}`,
      cert,
      renewalAt,
      update,
    );
  } catch (err) {
    ctx.log.warn({ err, zone: row.zone }, 'edge: wildcard certificate not issued');
    await update({
      status: 'error',
      error: `Certificate not issued: ${(err as Error).message}`,
      next_check_at: new Date(now.getTime() + retryDelayMs(attempts)),
    });
  }
  await edgeChanged(ctx);
}
