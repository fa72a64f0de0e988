/**
 * Where the platform's proxy sends an app's traffic (CONTRACT 3, 5): the app's running
 * machines on `internalPort` (or an exposed port), and its suspended ones, which the
 * proxy wakes. Host routing is public, so apps are looked up by their platform-wide
 * name; what a request may reach is the app's own machines, nothing else.
 *
 * The store is asked once per app and moment, not once per request: a query per request
 * was most of the proxy's cost under load. An app's machine list is kept for at most
 * ROUTES_TTL_MS and dropped at once when this process changes any machine (the change
 * words of services/machines/state-events.ts, an operation's start included), or when a
 * machine of the app did not take a connection (`forget`, asked by the picker, which then
 * asks again). Addresses are not kept: each request reads the runtime's record of the
 * machine (memory), so a destroyed machine's address, which another organization's
 * machine may get next, is never used from the list.
 */
import type { ProxyTarget, ProxyTargets } from './index.js';
import type { ServiceContext } from '../services/context.js';
import { machineAction, runtimeOf } from '../services/machines/lifecycle.js';
import { configOf, machinesQuery } from '../services/machines/records.js';
import { activityOf } from '../services/machines/sleep.js';
import { onAnyMachineChange } from '../services/machines/state-events.js';

import { ROUTES_TTL_MS } from '../services/machines/state-events.js';
export { ROUTES_TTL_MS };

/** A machine of the app that may serve, as the store had it. */
interface Route {
  machineId: string;
  state: ProxyTarget['state'];
  internalPort: number;
  exposePorts: readonly number[];
}

interface Cached {
  at: number;
  /** undefined: no such app. */
  routes: Promise<Route[] | undefined>;
}

export class MachineTargets implements ProxyTargets {
  private readonly cache = new Map<string, Cached>();

  constructor(private readonly ctx: ServiceContext) {
    // Changes are rare next to requests: any of them drops every app's list.
    onAnyMachineChange(ctx, () => this.cache.clear());
  }

  async resolve(app: string, port?: number): Promise<ProxyTarget[] | undefined> {
    const routes = await this.routes(app);
    if (!routes) return undefined;
    const runtime = runtimeOf(this.ctx);
    const targets: ProxyTarget[] = [];
    for (const route of routes) {
      if (port !== undefined && !route.exposePorts.includes(port)) continue;
      const address = await runtime.address(route.machineId, port ?? route.internalPort);
      if (!address) continue;
      targets.push({
        machineId: route.machineId,
        host: address.host,
        port: address.port,
        state: route.state,
      });
    }
    // A port no machine exposes is not an address of the app.
    if (port !== undefined && targets.length === 0) return undefined;
    return targets;
  }

  forget(app: string): void {
    this.cache.delete(app);
  }

  async wake(machineId: string): Promise<void> {
    const row = await machinesQuery(this.ctx.db)
      .where('machines.id', '=', machineId)
      .executeTakeFirstOrThrow();
    await machineAction(this.ctx, row.org_id, machineId, 'start');
  }

  touch(machineId: string): void {
    activityOf(this.ctx).set(machineId, Date.now());
  }

  begin(machineId: string): void {
    const inFlight = this.ctx.memory.machineInFlight;
    inFlight.set(machineId, (inFlight.get(machineId) ?? 0) + 1);
  }

  end(machineId: string): void {
    const inFlight = this.ctx.memory.machineInFlight;
    const left = (inFlight.get(machineId) ?? 1) - 1;
    if (left > 0) inFlight.set(machineId, left);
    else inFlight.delete(machineId);
  }

  /** The app's machines from the cache, or from the store (one query for concurrent asks). */
  private routes(app: string): Promise<Route[] | undefined> {
    const hit = this.cache.get(app);
    if (hit && Date.now() - hit.at < ROUTES_TTL_MS) return hit.routes;
    const entry: Cached = { at: Date.now(), routes: this.load(app) };
    // A failed lookup is not kept: the next request asks again.
    entry.routes.catch(() => {
      if (this.cache.get(app) === entry) this.cache.delete(app);
    });
    this.cache.set(app, entry);
    return entry.routes;
  }

  private async load(app: string): Promise<Route[] | undefined> {
    const rows = await machinesQuery(this.ctx.db)
      .where('apps.name', '=', app)
      // A machine a deploy retires takes no new request; its own finish (drain).
      .where('machines.retiring_at', 'is', null)
      .where((eb) =>
        eb.or([
          eb('machines.observed_state', 'in', ['running', 'suspended']),
          // Stopped by its sleep policy: still wanted running, so a request starts it.
          eb.and([
            eb('machines.observed_state', '=', 'stopped'),
            eb('machines.desired_state', '=', 'running'),
          ]),
        ]),
      )
      .orderBy('machines.created_at')
      .execute();
    const appExists =
      rows.length > 0 ||
      (await this.ctx.db
        .selectFrom('apps')
        .select('id')
        .where('name', '=', app)
        .executeTakeFirst());
    if (!appExists) return undefined;
    return rows.map((row) => {
      const config = configOf(row);
      return {
        machineId: row.id,
        state: row.observed_state as ProxyTarget['state'],
        internalPort: config.internalPort,
        exposePorts: config.exposePorts ?? [],
      };
    });
  }
}
