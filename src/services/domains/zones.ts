/**
 * Whole-zone claims (spec 2.10, 4.8): claim (200 when the org holds it already, 201
 * new), list, get, check (a durable job), release. A zone is proven once by two records
 * (`dns.acme`, `dns.point`), then gets a wildcard certificate through DNS-01 answered by
 * pier's own DNS, and every `<app>.<zone>` reaches the org's app `<app>`.
 */
import type { Zone } from '../../contracts/zones.js';
import { newId, randomBase62 } from '../../crypto/tokens.js';
import { canonicalHost, hostnameProblem } from '../../edge/names.js';
import { ApiError, badRequest, notFound } from '../../errors/api-error.js';
import { enqueue } from '../../jobs/queue.js';
import type { ServiceContext } from '../context.js';
import { removeCertificates } from './certificates.js';
import { lockClaims, provenConflict } from './claims.js';
import { checkNotPlatformName } from './domains.js';
import { reloadEdgeTable } from './hosts.js';
import { announceEdgeChange } from './memory.js';
import { toZone, type ZoneRow } from './records.js';

export const ZONE_CHECK_JOB = 'edge.zone-check';

function requireZones(ctx: ServiceContext): void {
  if (!ctx.config.dnsListen)
    throw new ApiError(
      'zones-unavailable',
      'Zones need the DNS server of the edge (PIER_DNS_LISTEN), which this installation does not run.',
    );
}

export async function findZone(ctx: ServiceContext, orgId: string, zone: string): Promise<ZoneRow> {
  const row = await ctx.db
    .selectFrom('edge_zones')
    .selectAll()
    .where('org_id', '=', orgId)
    .where('zone', '=', canonicalHost(zone))
    .executeTakeFirst();
  if (!row) throw notFound(`Zone '${zone}'`);
  return row;
}

export async function claimZone(
  ctx: ServiceContext,
  orgId: string,
  input: string,
): Promise<{ created: boolean; zone: Zone }> {
  const zone = canonicalHost(input);
  const problem = hostnameProblem(zone);
  if (problem) throw badRequest([{ path: 'zone', message: problem }]);
  requireZones(ctx);
  checkNotPlatformName(ctx, zone);
  const result = await ctx.db.transaction().execute(async (tx) => {
    await lockClaims(tx);
    const same = await tx
      .selectFrom('edge_zones')
      .selectAll()
      .where('org_id', '=', orgId)
      .where('zone', '=', zone)
      .executeTakeFirst();
    if (same) return { created: false, row: same };
    // A zone overlapping another org's proven zone (same, above or below), or above its
    // proven domains, would let one org answer for names the other proved. Unproven
    // claims block nothing (claims.ts).
    const proven = await provenConflict(tx, { kind: 'zone', orgId, name: zone });
    if (proven) throw new ApiError('conflict', proven);
    const row = await tx
      .insertInto('edge_zones')
      .values({ id: newId('zon'), org_id: orgId, zone, acme_label: randomBase62(20).toLowerCase() })
      .returningAll()
      .executeTakeFirstOrThrow();
    await enqueue(tx, ctx.jobs, ZONE_CHECK_JOB, { zoneId: row.id }, { dedupeKey: row.id });
    return { created: true, row };
  });
  return { created: result.created, zone: toZone(ctx.config, result.row) };
}

export async function listZones(ctx: ServiceContext, orgId: string): Promise<Zone[]> {
  const rows = await ctx.db
    .selectFrom('edge_zones')
    .selectAll()
    .where('org_id', '=', orgId)
    .orderBy('zone')
    .execute();
  return rows.map((r) => toZone(ctx.config, r));
}

export async function getZone(ctx: ServiceContext, orgId: string, zone: string): Promise<Zone> {
  return toZone(ctx.config, await findZone(ctx, orgId, zone));
}

export async function checkZone(
  ctx: ServiceContext,
  orgId: string,
  zone: string,
): Promise<{ status: 'queued'; zone: string; record: Zone }> {
  const row = await findZone(ctx, orgId, zone);
  await enqueue(ctx.db, ctx.jobs, ZONE_CHECK_JOB, { zoneId: row.id }, { dedupeKey: row.id });
  return { status: 'queued', zone: row.zone, record: toZone(ctx.config, row) };
}

export async function releaseZone(ctx: ServiceContext, orgId: string, zone: string): Promise<void> {
  const row = await findZone(ctx, orgId, zone);
  const users = await ctx.db
    .selectFrom('edge_domains')
    .select('domain')
    .where('zone_id', '=', row.id)
    .execute();
  if (users.length > 0)
    throw new ApiError(
      'zone-in-use',
      `Domains rely on the zone: ${users.map((u) => u.domain).join(', ')}. Remove them first.`,
    );
  await ctx.db.transaction().execute(async (tx) => {
    await tx.deleteFrom('edge_zones').where('id', '=', row.id).execute();
    // Only a proven zone's: an unproven one shares its name with another org's certificate.
    if (row.verified_at) await removeCertificates(tx, [`*.${row.zone}`]);
    await announceEdgeChange(tx);
  });
  await reloadEdgeTable(ctx);
}

/** TXT values pier's DNS answers at `<label>.acme.<edge host>`: the zone's DNS-01 answers. */
export async function acmeTxtValues(ctx: ServiceContext, label: string): Promise<string[]> {
  const zone = await ctx.db
    .selectFrom('edge_zones')
    .select('zone')
    .where('acme_label', '=', label)
    .executeTakeFirst();
  if (!zone) return [];
  const rows = await ctx.db
    .selectFrom('edge_challenges')
    .select('value')
    .where('kind', '=', 'dns-01')
    .where('key', '=', `_acme-challenge.${zone.zone}`)
    .execute();
  return rows.map((r) => r.value);
}
