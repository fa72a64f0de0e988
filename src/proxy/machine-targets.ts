/**
 * Where the platform's proxy sends an app's traffic (CONTRACT 3, 5): the app's running
 * machines on `internalPort` (or an exposed port), and its suspended ones, which the
 * proxy wakes. Host routing is public, so apps are looked up by their platform-wide
 * name; what a request may reach is the app's own machines, nothing else.
 */
import type { ProxyTarget, ProxyTargets } from './index.js';
import type { ServiceContext } from '../services/context.js';
import { machineAction, runtimeOf } from '../services/machines/lifecycle.js';
import { configOf, machinesQuery } from '../services/machines/records.js';
import { activityOf } from '../services/machines/sleep.js';

export class MachineTargets implements ProxyTargets {
  constructor(private readonly ctx: ServiceContext) {}

  async resolve(app: string, port?: number): Promise<ProxyTarget[] | undefined> {
    const rows = await machinesQuery(this.ctx.db)
      .where('apps.name', '=', app)
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
    const runtime = runtimeOf(this.ctx);
    const targets: ProxyTarget[] = [];
    for (const row of rows) {
      const config = configOf(row);
      if (port !== undefined && !(config.exposePorts ?? []).includes(port)) continue;
      const address = await runtime.address(row.id, port ?? config.internalPort);
      if (!address) continue;
      targets.push({
        machineId: row.id,
        host: address.host,
        port: address.port,
        state: row.observed_state as ProxyTarget['state'],
      });
    }
    // A port no machine exposes is not an address of the app.
    if (port !== undefined && targets.length === 0) return undefined;
    return targets;
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
}
