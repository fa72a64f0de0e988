/**
 * Public UDP endpoints of an app (spec 4.6): a public port from `PIER_UDP_PORTS`,
 * assigned by pier, forwards datagrams to `targetPort` on the app's running machines
 * (udp-relay.ts). At most `PIER_UDP_ENDPOINTS_PER_ORG` per organization.
 */
import type { CreatedUdp, CreateUdpBody, UdpEndpoint } from '../../contracts/udp.js';
import { newId } from '../../crypto/tokens.js';
import { ApiError, notFound } from '../../errors/api-error.js';
import { candidatePorts, parsePortRange } from '../../host/ports.js';
import type { ServiceContext } from '../context.js';
import { findApp, type AppRow } from './records.js';
import { udpRelaysOf, type EndpointRow } from './udp-relay.js';

const MAX_BIND_TRIES = 32;
const DEFAULT_TARGET_PORT = 3000;

type Row = EndpointRow & { created_at: Date };

function publicHost(ctx: ServiceContext): string {
  return new URL(ctx.config.publicUrl).hostname;
}

function toEndpoint(ctx: ServiceContext, app: AppRow, r: Row): UdpEndpoint {
  const host = publicHost(ctx);
  return {
    id: r.id,
    appName: app.name,
    publicPort: r.public_port,
    targetPort: r.target_port,
    host,
    address: `${host.includes(':') ? `[${host}]` : host}:${r.public_port}`,
    createdAt: r.created_at.toISOString(),
  };
}

const columns = ['id', 'app_id', 'public_port', 'target_port', 'created_at'] as const;

export async function listUdp(
  ctx: ServiceContext,
  orgId: string,
  appName: string,
): Promise<UdpEndpoint[]> {
  const app = await findApp(ctx.db, orgId, appName);
  const rows = await ctx.db
    .selectFrom('udp_endpoints')
    .select(columns)
    .where('app_id', '=', app.id)
    .orderBy('created_at')
    .execute();
  return rows.map((r) => toEndpoint(ctx, app, r));
}

/** The app's internalPort, as its newest machine has it; 3000 (machines' default) without one. */
async function internalPortOf(ctx: ServiceContext, appId: string): Promise<number> {
  const row = await ctx.db
    .selectFrom('machines')
    .select('config')
    .where('app_id', '=', appId)
    .where('observed_state', '<>', 'deleted')
    .orderBy('created_at', 'desc')
    .executeTakeFirst();
  const port = row?.config.internalPort;
  return typeof port === 'number' ? port : DEFAULT_TARGET_PORT;
}

async function checkOrgLimit(ctx: ServiceContext, orgId: string): Promise<void> {
  const { n } = await ctx.db
    .selectFrom('udp_endpoints')
    .innerJoin('apps', 'apps.id', 'udp_endpoints.app_id')
    .select((eb) => eb.fn.countAll<string>().as('n'))
    .where('apps.org_id', '=', orgId)
    .executeTakeFirstOrThrow();
  const limit = ctx.config.udpEndpointsPerOrg;
  if (Number(n) >= limit) {
    throw new ApiError('org-limit-udp', undefined, { limit, current: Number(n) });
  }
}

/**
 * Takes a free public port: one no endpoint holds (the unique index decides between
 * concurrent creates) that this host can bind (another program may hold it).
 */
export async function createUdp(
  ctx: ServiceContext,
  orgId: string,
  appName: string,
  body: CreateUdpBody,
): Promise<CreatedUdp> {
  const app = await findApp(ctx.db, orgId, appName);
  await checkOrgLimit(ctx, orgId);
  const targetPort = body.targetPort ?? (await internalPortOf(ctx, app.id));
  const taken = new Set(
    (await ctx.db.selectFrom('udp_endpoints').select('public_port').execute()).map(
      (r) => r.public_port,
    ),
  );
  let tries = 0;
  for (const port of candidatePorts(parsePortRange(ctx.config.udpPorts), taken)) {
    if (tries++ >= MAX_BIND_TRIES) break;
    const row = await ctx.db
      .insertInto('udp_endpoints')
      .values({ id: newId('udp'), app_id: app.id, public_port: port, target_port: targetPort })
      .onConflict((oc) => oc.column('public_port').doNothing())
      .returning(columns)
      .executeTakeFirst();
    if (!row) continue;
    try {
      await udpRelaysOf(ctx)?.open(row);
    } catch {
      await ctx.db.deleteFrom('udp_endpoints').where('id', '=', row.id).execute();
      continue;
    }
    const ep = toEndpoint(ctx, app, row);
    return {
      ...ep,
      note: `UDP datagrams to ${ep.address} reach port ${targetPort} of the app's running machines (a sleeping one is woken); replies go back to the sender. Flows end after 60 s of quiet.`,
    };
  }
  throw new ApiError('udp-ports-exhausted');
}

export async function deleteUdp(
  ctx: ServiceContext,
  orgId: string,
  appName: string,
  id: string,
): Promise<void> {
  const app = await findApp(ctx.db, orgId, appName);
  const gone = await ctx.db
    .deleteFrom('udp_endpoints')
    .where('app_id', '=', app.id)
    .where('id', '=', id)
    .executeTakeFirst();
  if (!gone.numDeletedRows) throw notFound(`UDP endpoint '${id}'`);
  udpRelaysOf(ctx)?.close(id);
}
