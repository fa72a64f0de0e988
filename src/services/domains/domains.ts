/**
 * Custom domains of an app (spec 4.8): add (the answer names the DNS records to set),
 * list, check (a durable job, `checks.ts`), redirect, delete. A name is one org's: another
 * org's domain answers 404 to every route, and adding a name another org proved is 409
 * (an unproven claim holds nothing: claims.ts).
 */
import type { Domain } from '../../contracts/domains.js';
import { canonicalHost, hostnameProblem, isWithin } from '../../edge/names.js';
import { ApiError, badRequest, notFound } from '../../errors/api-error.js';
import { enqueue } from '../../jobs/queue.js';
import { newId, randomBase62 } from '../../crypto/tokens.js';
import type { Executor } from '../../store/db.js';
import { findApp } from '../apps/records.js';
import type { ServiceContext } from '../context.js';
import { edgeChanged, reloadEdgeTable } from './hosts.js';
import { edgeAddressOf, toDomain, type DomainRow } from './records.js';
import { removeCertificates } from './certificates.js';
import { lockClaims, provenConflict } from './claims.js';
import { announceEdgeChange } from './memory.js';

export const DOMAIN_CHECK_JOB = 'edge.domain-check';

function domainsQuery(ex: Executor) {
  return ex
    .selectFrom('edge_domains')
    .innerJoin('apps', 'apps.id', 'edge_domains.app_id')
    .leftJoin('edge_zones', 'edge_zones.id', 'edge_domains.zone_id')
    .selectAll('edge_domains')
    .select(['apps.name as app_name', 'edge_zones.zone as zone_name']);
}

export async function domainRowById(ex: Executor, id: string): Promise<DomainRow | undefined> {
  return domainsQuery(ex).where('edge_domains.id', '=', id).executeTakeFirst();
}

async function findDomain(
  ctx: ServiceContext,
  orgId: string,
  appName: string,
  domain: string,
): Promise<DomainRow> {
  const app = await findApp(ctx.db, orgId, appName);
  const row = await domainsQuery(ctx.db)
    .where('edge_domains.app_id', '=', app.id)
    .where('edge_domains.domain', '=', canonicalHost(domain))
    .executeTakeFirst();
  if (!row) throw notFound(`Domain '${domain}'`);
  return row;
}

/** Refuses names the platform answers itself: default addresses and the edge's name. */
export function checkNotPlatformName(ctx: ServiceContext, domain: string): void {
  const publicHost = new URL(ctx.config.publicUrl).hostname;
  const appsDomain = ctx.config.appsDomain?.toLowerCase();
  for (const own of [publicHost, ...(appsDomain ? [appsDomain] : []), edgeAddressOf(ctx.config)]) {
    if (isWithin(domain, own))
      throw new ApiError(
        'shadows-default-address',
        `'${domain}' is (or is below) ${own}, where apps have their default addresses.`,
      );
  }
}

/**
 * Sending domains of the mail system would answer 409 `mail-domain` here; this
 * installation has no mail system yet, so no name is one.
 */
function checkNotMailDomain(_domain: string): void {}

export async function addDomain(
  ctx: ServiceContext,
  orgId: string,
  appName: string,
  input: string,
): Promise<Domain> {
  const domain = canonicalHost(input);
  const problem = hostnameProblem(domain);
  if (problem) throw badRequest([{ path: 'domain', message: problem }]);
  const app = await findApp(ctx.db, orgId, appName);
  checkNotPlatformName(ctx, domain);
  checkNotMailDomain(domain);
  const id = await ctx.db.transaction().execute(async (tx) => {
    await lockClaims(tx);
    const taken = await tx
      .selectFrom('edge_domains')
      .select('app_id')
      .where('org_id', '=', orgId)
      .where('domain', '=', domain)
      .executeTakeFirst();
    if (taken?.app_id === app.id)
      throw new ApiError('already-exists', `'${domain}' is already a domain of this app.`);
    if (taken) throw new ApiError('conflict', `'${domain}' is already in use.`);
    // Another organization's claim blocks the name only once proven (claims.ts).
    const proven = await provenConflict(tx, { kind: 'domain', orgId, name: domain });
    if (proven) throw new ApiError('conflict', proven);
    const zones = await tx
      .selectFrom('edge_zones')
      .select(['id', 'zone'])
      .where('org_id', '=', orgId)
      .where('status', 'in', ['verified', 'cert_issued'])
      .execute();
    const zone = zones.find((z) => isWithin(domain, z.zone));
    const id = newId('dom');
    await tx
      .insertInto('edge_domains')
      .values({
        id,
        org_id: orgId,
        app_id: app.id,
        domain,
        proof: `pier-proof=${randomBase62(32)}`,
        zone_id: zone?.id ?? null,
      })
      .execute();
    await enqueue(tx, ctx.jobs, DOMAIN_CHECK_JOB, { domainId: id }, { dedupeKey: id });
    return id;
  });
  return toDomain(ctx.config, (await domainRowById(ctx.db, id))!);
}

export async function listDomains(
  ctx: ServiceContext,
  orgId: string,
  appName: string,
): Promise<Domain[]> {
  const app = await findApp(ctx.db, orgId, appName);
  const rows = await domainsQuery(ctx.db)
    .where('edge_domains.app_id', '=', app.id)
    .orderBy('edge_domains.domain')
    .execute();
  return rows.map((r) => toDomain(ctx.config, r));
}

export async function checkDomain(
  ctx: ServiceContext,
  orgId: string,
  appName: string,
  domain: string,
): Promise<{ status: 'queued'; domain: string; record: Domain }> {
  const row = await findDomain(ctx, orgId, appName, domain);
  await enqueue(ctx.db, ctx.jobs, DOMAIN_CHECK_JOB, { domainId: row.id }, { dedupeKey: row.id });
  return { status: 'queued', domain: row.domain, record: toDomain(ctx.config, row) };
}

export async function setRedirect(
  ctx: ServiceContext,
  orgId: string,
  appName: string,
  domain: string,
  to: string | null,
): Promise<Domain> {
  const row = await findDomain(ctx, orgId, appName, domain);
  let target: string | null = null;
  if (to !== null) {
    target = canonicalHost(to);
    const appsHost = ctx.config.appsDomain?.toLowerCase() ?? new URL(ctx.config.publicUrl).hostname;
    const own = await ctx.db
      .selectFrom('edge_domains')
      .select('domain')
      .where('app_id', '=', row.app_id)
      .where('domain', '=', target)
      .executeTakeFirst();
    const isDefault = target === `${appName}.${appsHost}`;
    if (target === row.domain || (!own && !isDefault))
      throw badRequest([
        {
          path: 'to',
          message: 'must be another hostname of the same app (a domain or its default address)',
        },
      ]);
  }
  await ctx.db
    .updateTable('edge_domains')
    .set({ redirect_to: target })
    .where('id', '=', row.id)
    .execute();
  await edgeChanged(ctx);
  return toDomain(ctx.config, (await domainRowById(ctx.db, row.id))!);
}

export async function deleteDomain(
  ctx: ServiceContext,
  orgId: string,
  appName: string,
  domain: string,
): Promise<void> {
  const row = await findDomain(ctx, orgId, appName, domain);
  await ctx.db.transaction().execute(async (tx) => {
    await removeDomains(tx, row.app_id, row.domain);
    await announceEdgeChange(tx);
  });
  await reloadEdgeTable(ctx);
}

/**
 * Removes the app's domain `domain` (or, without one, all of them) in the caller's
 * transaction, with what is theirs: their certificates and sealed keys, their queued
 * checks, and the redirects of the app's other names to them. A check running meanwhile
 * stores nothing (it finds no row: `runDomainCheck`). The caller announces the change
 * (`announceEdgeChange`) in the same transaction.
 */
export async function removeDomains(tx: Executor, appId: string, domain?: string): Promise<void> {
  let deletion = tx.deleteFrom('edge_domains').where('app_id', '=', appId);
  if (domain !== undefined) deletion = deletion.where('domain', '=', domain);
  const gone = await deletion.returning(['id', 'domain', 'verified_at']).execute();
  if (gone.length === 0) return;
  const names = gone.map((d) => d.domain);
  await tx
    .updateTable('edge_domains')
    .set({ redirect_to: null })
    .where('app_id', '=', appId)
    .where('redirect_to', 'in', names)
    .execute();
  // Only a proven claim's: an unproven one shares its name with another org's certificate.
  await removeCertificates(
    tx,
    gone.filter((d) => d.verified_at !== null).map((d) => d.domain),
  );
  await tx
    .deleteFrom('jobs')
    .where('kind', '=', DOMAIN_CHECK_JOB)
    .where('state', '=', 'queued')
    .where(
      'dedupe_key',
      'in',
      gone.map((d) => d.id),
    )
    .execute();
}
