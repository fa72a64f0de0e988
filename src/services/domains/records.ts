/** Rows of domains and zones → records, and the DNS records their answers ask for. */
import { isIP } from 'node:net';
import type { DnsRecord, Domain } from '../../contracts/domains.js';
import type { Zone } from '../../contracts/zones.js';
import type { Config } from '../../config.js';
import type { EdgeDomainsTable, EdgeZonesTable } from '../../store/schema.js';
import type { Selectable } from 'kysely';

export type DomainRow = Selectable<EdgeDomainsTable> & {
  app_name: string;
  zone_name: string | null;
};
export type ZoneRow = Selectable<EdgeZonesTable>;

/** The host customers point records at (CONTRACT 6 `PIER_EDGE_ADDRESS`). */
export function edgeAddressOf(config: Config): string {
  return config.edgeAddress ?? new URL(config.publicUrl).hostname.replace(/^\[|\]$/g, '');
}

/** A record pointing `name` at the edge: A/AAAA for an address, else CNAME. */
export function pointRecord(config: Config, name: string): DnsRecord {
  const edge = edgeAddressOf(config);
  const family = isIP(edge);
  return { type: family === 4 ? 'A' : family === 6 ? 'AAAA' : 'CNAME', name, value: edge };
}

export const PROOF_PREFIX = '_pier-challenge.';
export const ACME_PREFIX = '_acme-challenge.';

/** Where pier answers a zone's delegated DNS-01 TXT: `<label>.acme.<edge host>`. */
export function acmeTarget(config: Config, label: string): string {
  return `${label}.acme.${edgeAddressOf(config)}`;
}

function progress(r: Selectable<EdgeDomainsTable> | ZoneRow) {
  return {
    status: r.status,
    ...(r.error !== null ? { error: r.error } : {}),
    attempts: r.attempts,
    ...(r.last_checked_at ? { lastCheckedAt: r.last_checked_at.toISOString() } : {}),
    ...(r.verified_at ? { verifiedAt: r.verified_at.toISOString() } : {}),
    ...(r.cert_issued_at ? { certIssuedAt: r.cert_issued_at.toISOString() } : {}),
    ...(r.cert_not_after ? { certNotAfter: r.cert_not_after.toISOString() } : {}),
    createdAt: r.created_at.toISOString(),
  };
}

export function toDomain(config: Config, r: DomainRow): Domain {
  return {
    domain: r.domain,
    app: r.app_name,
    ...progress(r),
    redirectTo: r.redirect_to,
    ...(r.zone_name ? { zone: r.zone_name } : {}),
    dns: {
      ...(r.zone_name
        ? {}
        : { proof: { type: 'TXT' as const, name: PROOF_PREFIX + r.domain, value: r.proof } }),
      point: pointRecord(config, r.domain),
    },
  };
}

export function toZone(config: Config, r: ZoneRow): Zone {
  return {
    zone: r.zone,
    orgId: r.org_id,
    ...progress(r),
    acmeLabel: r.acme_label,
    dns: {
      acme: { type: 'CNAME', name: ACME_PREFIX + r.zone, value: acmeTarget(config, r.acme_label) },
      point: pointRecord(config, `*.${r.zone}`),
    },
  };
}
