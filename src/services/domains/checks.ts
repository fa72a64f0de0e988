/**
 * The check of a custom domain (a durable job): DNS proof and pointing read through the
 * configured resolver, then a certificate via ACME (`singleNameChallenges`). A name below
 * a proven zone of the org needs no record of its own, and the zone's apex or a name one
 * label below it needs no certificate either once the zone has its own.
 * The outcome is written on the row (`status`, `error`), with the time of the next check:
 * a retry on a growing schedule after a failure, the renewal after an issuance. The first
 * proof goes through `proveClaim`: it loses to another organization's earlier proof.
 */
import { isIP } from 'node:net';
import { DnsLookup } from '../../edge/dns-lookup.js';
import { isWithin } from '../../edge/names.js';
import type { ChallengeType } from '../../edge/acme.js';
import type { Executor } from '../../store/db.js';
import type { ServiceContext } from '../context.js';
import { keepCertificateOfOwner, obtainCertificate } from './certificates.js';
import { proveClaim } from './claims.js';
import { domainRowById } from './domains.js';
import { edgeChanged } from './hosts.js';
import { edgeAddressOf, PROOF_PREFIX, type DomainRow } from './records.js';

/** Retries: 30 s, doubling, at most an hour apart. */
export function retryDelayMs(attempts: number): number {
  return Math.min(3_600_000, 30_000 * 2 ** Math.max(0, attempts - 1));
}

/** Renew when a third of the lifetime (at most 30 days) is left. */
export function renewalAt(issuedAt: Date, notAfter: Date): Date {
  const margin = Math.min(30 * 86_400_000, (notAfter.getTime() - issuedAt.getTime()) / 3);
  return new Date(notAfter.getTime() - margin);
}

/**
 * The challenges a single name's certificate is ordered with, in turn: TLS-ALPN-01 on the
 * TLS edge when there is one (the CA connects to port 443, so the edge alone suffices),
 * then HTTP-01 on the API's listener (port 80), which also serves when the edge does not
 * run or the CA cannot reach it.
 */
export function singleNameChallenges(ctx: ServiceContext): ChallengeType[] {
  return ctx.config.tlsListen ? ['tls-alpn-01', 'http-01'] : ['http-01'];
}

export function dnsLookup(ctx: ServiceContext): DnsLookup {
  return new DnsLookup(ctx.config.dnsResolver);
}

/** Whether `name` points at the edge: a CNAME to its name, or a shared address. */
export async function pointsAtEdge(
  ctx: ServiceContext,
  dns: DnsLookup,
  name: string,
): Promise<boolean> {
  const edge = edgeAddressOf(ctx.config);
  const cnames = await dns.cname(name);
  if (cnames.includes(edge)) return true;
  const edgeAddresses = isIP(edge) ? [edge] : await dns.addresses(edge);
  const addresses = await dns.addresses(name);
  return addresses.some((a) => edgeAddresses.includes(a));
}

/** Why the DNS of a domain is not right yet, or undefined when it is. */
async function dnsProblem(ctx: ServiceContext, row: DomainRow): Promise<string | undefined> {
  const dns = dnsLookup(ctx);
  const proofName = PROOF_PREFIX + row.domain;
  if (!(await dns.txt(proofName)).includes(row.proof))
    return `The TXT record ${proofName} does not hold ${row.proof}.`;
  if (!(await pointsAtEdge(ctx, dns, row.domain)))
    return `${row.domain} does not point at ${edgeAddressOf(ctx.config)} (CNAME or address).`;
  return undefined;
}

/** The org's proven zone covering the domain, if any. */
async function coveringZone(ctx: ServiceContext, row: DomainRow) {
  const zones = await ctx.db
    .selectFrom('edge_zones')
    .selectAll()
    .where('org_id', '=', row.org_id)
    .where('status', 'in', ['verified', 'cert_issued'])
    .execute();
  return zones.find((z) => isWithin(row.domain, z.zone));
}

export async function runDomainCheck(ctx: ServiceContext, domainId: string): Promise<void> {
  const row = await domainRowById(ctx.db, domainId);
  if (!row || row.ended_at) return;
  const now = ctx.clock();
  const attempts = row.attempts + 1;
  const update = (values: Record<string, unknown>, ex: Executor = ctx.db) =>
    ex
      .updateTable('edge_domains')
      .set({ attempts, last_checked_at: now, ...values })
      .where('id', '=', domainId)
      .where('ended_at', 'is', null)
      .execute();
  const zone = await coveringZone(ctx, row);
  const problem = zone
    ? undefined
    : await dnsProblem(ctx, row).catch((err: Error) => `DNS lookup failed: ${err.message}`);
  if (problem) {
    await update({
      status: 'pending_dns',
      error: problem,
      next_check_at: new Date(now.getTime() + retryDelayMs(attempts)),
    });
    return;
  }
  const claim = { kind: 'domain' as const, id: domainId, orgId: row.org_id, name: row.domain };
  const holds = await proveClaim(ctx.db, claim, (tx) =>
    update(
      {
        status: 'verified',
        error: null,
        verified_at: row.verified_at ?? now,
        zone_id: zone?.id ?? null,
        next_check_at: null,
      },
      tx,
    ),
  );
  if (!holds) return;
  await edgeChanged(ctx);
  // The zone's apex, or one label below it: the zone's certificate serves the name.
  const parent = row.domain.slice(row.domain.indexOf('.') + 1);
  const wildcardCovers =
    zone?.status === 'cert_issued' && (row.domain === zone.zone || parent === zone.zone);
  try {
    if (wildcardCovers) {
      await update({
        status: 'cert_issued',
        error: null,
        cert_issued_at: zone.cert_issued_at,
        cert_not_after: zone.cert_not_after,
        // A wildcard is renewed with its zone; the name is looked at again then.
        next_check_at: renewalAt(zone.cert_issued_at!, zone.cert_not_after!),
      });
    } else {
      const cert = await obtainCertificate(ctx, [row.domain], singleNameChallenges(ctx));
      // Deleted meanwhile (alone or with its app): the certificate is not kept.
      await keepCertificateOfOwner(
        ctx,
        { table: 'edge_domains', id: domainId },
        row.domain,
        cert,
        renewalAt,
        update,
      );
    }
  } catch (err) {
    ctx.log.warn({ err, domain: row.domain }, 'edge: certificate not issued');
    await update({
      status: 'error',
      error: `Certificate not issued: ${(err as Error).message}`,
      next_check_at: new Date(now.getTime() + retryDelayMs(attempts)),
    });
  }
  await edgeChanged(ctx);
}
