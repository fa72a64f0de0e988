/**
 * Choosing the machine for one request: round-robin over the app's running machines,
 * skipping those that refuse the connection, and waking a sleeping one when none of
 * them serves. The connection itself is the caller's (`attempt`): HTTP and WebSocket
 * traffic connect differently but choose alike.
 */
import { ApiError } from '../errors/api-error.js';
import type { AppAddress } from './host.js';
import type { ProxyLog, ProxyTarget, ProxyTargets } from './types.js';

/**
 * Thrown by an attempt when no byte of the request has left yet, so another machine may
 * take the request: `refused` (connection refused, reset, unreachable) or `timeout`.
 */
export class ConnectFailure extends Error {
  constructor(
    readonly kind: 'refused' | 'timeout',
    cause?: unknown,
  ) {
    super(`connect ${kind}`, { cause });
    this.name = 'ConnectFailure';
  }
}

/** Connection errors that mean "this machine does not serve", not "the request failed". */
export function asConnectFailure(err: unknown): ConnectFailure {
  if (err instanceof ConnectFailure) return err;
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  return new ConnectFailure(code === 'ETIMEDOUT' ? 'timeout' : 'refused', err);
}

const STATE_ORDER = { suspended: 0, stopped: 1 } as const;

export class TargetPicker {
  // One cursor per app address, so each app's machines take turns independently.
  private readonly cursors = new Map<string, number>();
  // Concurrent requests to a sleeping app share one wake instead of each starting one.
  private readonly waking = new Map<string, Promise<void>>();

  constructor(
    private readonly targets: ProxyTargets,
    private readonly log: ProxyLog,
  ) {}

  /**
   * Runs `attempt` on the app's machines until one connects, and returns its result.
   * Throws an ApiError for the client: 404 no such app, 503 no machine or wake failed,
   * 502/504 when every machine refused or timed out.
   */
  async connect<T>(address: AppAddress, attempt: (target: ProxyTarget) => Promise<T>): Promise<T> {
    let all = await this.lookup(address);
    if (all.length === 0) throw noMachine();
    const failures: ConnectFailure[] = [];
    const tryOne = async (target: ProxyTarget): Promise<{ value: T } | undefined> => {
      try {
        return { value: await attempt(target) };
      } catch (err) {
        if (!(err instanceof ConnectFailure)) throw err;
        this.log.warn(
          { app: address.app, machineId: target.machineId, kind: err.kind, err: err.cause },
          'proxy: machine did not accept the connection',
        );
        failures.push(err);
        return undefined;
      }
    };

    const tried = new Set<string>();
    for (const target of this.rotate(address, running(all))) {
      tried.add(target.machineId);
      const done = await tryOne(target);
      if (done) return done.value;
    }
    // A machine that did not serve may come from a list `resolve` had kept: ask the store
    // again, and try the running machines it adds before waking one.
    if (failures.length > 0 && this.targets.forget) {
      this.targets.forget(address.app);
      all = await this.lookup(address);
      for (const target of running(all).filter((t) => !tried.has(t.machineId))) {
        const done = await tryOne(target);
        if (done) return done.value;
      }
    }

    // No running machine served: wake one that sleeps (suspended before stopped, as a
    // suspended machine comes back much faster). The request waits for it.
    const sleeping = all
      .filter((t) => t.state !== 'running')
      .sort(
        (a, b) =>
          STATE_ORDER[a.state as keyof typeof STATE_ORDER] -
          STATE_ORDER[b.state as keyof typeof STATE_ORDER],
      );
    const sleeper = sleeping[0];
    if (sleeper) {
      await this.wake(address, sleeper);
      // A restarted machine may come back on another address: ask again.
      const fresh = (await this.lookup(address)).find((t) => t.machineId === sleeper.machineId);
      const done = await tryOne(fresh ?? sleeper);
      if (done) return done.value;
    }

    if (failures.length === 0) throw noMachine();
    if (failures.every((f) => f.kind === 'timeout')) {
      throw new ApiError(
        'upstream-timeout',
        "The app's machine did not accept the connection in time.",
      );
    }
    throw new ApiError('upstream-failed', "The app's machine refused the connection.");
  }

  private async lookup(address: AppAddress): Promise<ProxyTarget[]> {
    let found: ProxyTarget[] | undefined;
    try {
      found = await this.targets.resolve(address.app, address.port);
    } catch (err) {
      if (err instanceof ApiError) throw err;
      this.log.error({ app: address.app, err }, 'proxy: looking up the app failed');
      throw new ApiError('unavailable', "The app's machines could not be looked up; retry.");
    }
    if (found === undefined) {
      const what =
        address.port === undefined
          ? `app ${address.app}`
          : `port ${address.port} of app ${address.app}`;
      throw new ApiError('not-found', `No ${what}.`);
    }
    return found;
  }

  /** `list` starting at this address's cursor, which moves on by one per request. */
  private rotate(address: AppAddress, list: ProxyTarget[]): ProxyTarget[] {
    if (list.length < 2) return list;
    const key = address.port === undefined ? address.app : `${address.app}:${address.port}`;
    const at = this.cursors.get(key) ?? 0;
    // Wrap well before the counter loses precision; the modulo keeps the order fair.
    this.cursors.set(key, (at + 1) % 1_000_000_007);
    const start = at % list.length;
    return [...list.slice(start), ...list.slice(0, start)];
  }

  private async wake(address: AppAddress, target: ProxyTarget): Promise<void> {
    let pending = this.waking.get(target.machineId);
    if (!pending) {
      pending = this.targets.wake(target.machineId).finally(() => {
        this.waking.delete(target.machineId);
      });
      this.waking.set(target.machineId, pending);
    }
    try {
      await pending;
    } catch (err) {
      this.log.warn({ app: address.app, machineId: target.machineId, err }, 'proxy: wake failed');
      throw new ApiError('unavailable', "The app's machine could not be woken; retry.");
    }
  }
}

const running = (list: ProxyTarget[]) => list.filter((t) => t.state === 'running');

function noMachine(): ApiError {
  return new ApiError('unavailable', 'The app has no running machine.');
}
