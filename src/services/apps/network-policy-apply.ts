/**
 * Keeps the network policy of this host's machines in step with their apps' rows.
 * `reconcileMachine` states the policy a machine should have (or none, once it no longer
 * runs) and applies it when it differs from what this process last applied. It runs on
 * PUT for the app's running machines, for every machine at start-up, and on every word
 * that a machine's row changed (`ctx.memory.machineChanges`: starts, wakes, restarts on
 * another address), so a machine that starts is limited before it serves for long.
 */
import type { NetworkLimits } from '../../runtime/sandbox/network-policy.js';
import {
  applyNetworkPolicy,
  removeNetworkPolicy,
  vethIndex,
} from '../../runtime/sandbox/network-policy.js';
import type { ServiceContext } from '../context.js';
import { runtimeOf } from '../machines/lifecycle.js';

/** What this process applied, per machine (`ip|veth index|place|mbit|perMinute`): repeats cost nothing. */
const applied = new WeakMap<ServiceContext, Map<string, string>>();
/** One reconcile per machine at a time; a word arriving meanwhile runs it once more. */
const running = new WeakMap<ServiceContext, Map<string, Promise<void>>>();

const SETTLE_MS = 1_000;

function memo<T>(map: WeakMap<ServiceContext, Map<string, T>>, ctx: ServiceContext) {
  let m = map.get(ctx);
  if (!m) map.set(ctx, (m = new Map()));
  return m;
}

/**
 * Policies are host-local and need root (tc, nft), as machines do; elsewhere they are
 * stored only. (`ctx.machines` is made on first use, so it cannot be asked at start-up.)
 */
const canEnforce = (_ctx: ServiceContext) => process.getuid?.() === 0;

async function wanted(
  ctx: ServiceContext,
  machineId: string,
): Promise<{ ip: string; limits: NetworkLimits } | undefined> {
  const row = await ctx.db
    .selectFrom('machines')
    .leftJoin('app_network_policy', 'app_network_policy.app_id', 'machines.app_id')
    .select([
      'machines.observed_state',
      'machines.private_ip',
      'app_network_policy.bandwidth_mbit',
      'app_network_policy.new_connections_per_minute',
    ])
    .where('machines.id', '=', machineId)
    .executeTakeFirst();
  if (!row?.private_ip || !['running', 'suspended', 'starting'].includes(row.observed_state))
    return undefined;
  const limits = {
    bandwidthMbit: row.bandwidth_mbit ?? null,
    newConnectionsPerMinute: row.new_connections_per_minute ?? null,
  };
  if (limits.bandwidthMbit === null && limits.newConnectionsPerMinute === null) return undefined;
  return { ip: row.private_ip, limits };
}

async function reconcileOnce(ctx: ServiceContext, machineId: string): Promise<void> {
  const want = await wanted(ctx, machineId);
  const done = memo(applied, ctx);
  if (!want) {
    if (done.has(machineId)) await removeNetworkPolicy(machineId);
    done.delete(machineId);
    return;
  }
  // Keyed by the veth's index too: a restarted machine has a new veth without qdiscs.
  const index = await vethIndex(machineId);
  if (index === undefined) return; // not on the network yet: its next change word
  // The connection limit sits in the machine's netns, unless its packets never pass the
  // host kernel's filters there (gVisor's own netstack): then on the host (sandbox module).
  const guest = await runtimeOf(ctx).guest(machineId);
  if (!guest) return; // its process is not up yet: its next change word
  const place = guest.ownNetworkStack ? 'host' : 'netns';
  const key = `${want.ip}|${index}|${place}|${want.limits.bandwidthMbit}|${want.limits.newConnectionsPerMinute}`;
  if (done.get(machineId) === key) return;
  await applyNetworkPolicy(machineId, want.ip, want.limits, place);
  done.set(machineId, key);
}

/** Brings machine `machineId`'s policy in step with the store (serialised per machine). */
export async function reconcileMachine(ctx: ServiceContext, machineId: string): Promise<void> {
  if (!canEnforce(ctx)) return;
  const inFlight = memo(running, ctx);
  const before = inFlight.get(machineId) ?? Promise.resolve();
  const next = before.catch(() => undefined).then(() => reconcileOnce(ctx, machineId));
  inFlight.set(machineId, next);
  try {
    await next;
  } finally {
    if (inFlight.get(machineId) === next) inFlight.delete(machineId);
  }
}

/** Applies the app's policy to its machines that run here now; their ids. */
export async function applyToApp(ctx: ServiceContext, appId: string): Promise<string[]> {
  const rows = await ctx.db
    .selectFrom('machines')
    .select('id')
    .where('app_id', '=', appId)
    .where('observed_state', 'in', ['running', 'suspended', 'starting'])
    .execute();
  if (!canEnforce(ctx)) return [];
  for (const r of rows) await reconcileMachine(ctx, r.id);
  return rows.map((r) => r.id);
}

/**
 * Applies every machine's policy now and follows machine changes from here on; returns
 * the stop function. Wraps the emitter's `emit`, since change words are per-machine
 * events and no wildcard exists.
 */
export async function followNetworkPolicies(ctx: ServiceContext): Promise<() => void> {
  if (!canEnforce(ctx)) return () => undefined;
  const emitter = ctx.memory.machineChanges;
  const original = emitter.emit.bind(emitter);
  const later = new Map<string, NodeJS.Timeout>();
  const reconcile = (id: string) =>
    reconcileMachine(ctx, id).catch((err: unknown) =>
      ctx.log.warn({ err, machineId: id }, 'network policy not applied'),
    );
  emitter.emit = (event: string | symbol, ...args: unknown[]) => {
    if (typeof event === 'string' && event.startsWith('mch-')) {
      void reconcile(event);
      // Once more when the changes of a start have settled (a word may come before the
      // row or the veth it speaks of is final).
      clearTimeout(later.get(event));
      const timer = setTimeout(() => {
        later.delete(event);
        void reconcile(event);
      }, SETTLE_MS);
      timer.unref();
      later.set(event, timer);
    }
    return original(event, ...args);
  };
  const rows = await ctx.db
    .selectFrom('machines')
    .innerJoin('app_network_policy', 'app_network_policy.app_id', 'machines.app_id')
    .select('machines.id')
    .where('machines.observed_state', 'in', ['running', 'suspended'])
    .execute();
  for (const r of rows) {
    await reconcileMachine(ctx, r.id).catch((err: unknown) =>
      ctx.log.warn({ err, machineId: r.id }, 'network policy not applied'),
    );
  }
  return () => {
    emitter.emit = original;
    for (const t of later.values()) clearTimeout(t);
  };
}
