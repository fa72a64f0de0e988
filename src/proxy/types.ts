/**
 * The proxy's seam to the rest of pier: it asks `ProxyTargets` where an app's machines
 * are and never learns about apps, organizations or runtimes itself. The machines
 * service implements it; unit tests script it over plain HTTP servers; test/machines drives the real one.
 */
import type { AccessGate } from './protection.js';

import type { AppAddress } from './host.js';

/** One machine that can serve the port asked for, as the platform sees it now. */
export interface ProxyTarget {
  /** `mch-…`; the key for `wake` and `touch`. */
  machineId: string;
  /** Address the proxy connects to (the machine's private address). */
  host: string;
  port: number;
  state: 'running' | 'suspended' | 'stopped';
}

/** Where an app's traffic goes; implemented by the machines service. */
export interface ProxyTargets {
  /**
   * The app's machines that can serve `port` (internalPort when omitted, or one of
   * exposePorts); undefined when there is no such app (or it does not expose `port`).
   */
  resolve(app: string, port?: number): Promise<ProxyTarget[] | undefined>;
  /** Wakes a suspended (or stopped, when allowed) machine; resolves when it serves again. */
  wake(machineId: string): Promise<void>;
  /** A request reached the machine (idle detection; cheap, called per request). */
  touch(machineId: string): void;
  /** A request (or tunnel) to the machine began / ended: what a retiring machine drains. */
  begin?(machineId: string): void;
  end?(machineId: string): void;
  /**
   * A machine of the app did not take a connection: if `resolve` answers from a cache,
   * the app's entry is dropped so the next `resolve` asks the store (optional).
   */
  forget?(app: string): void;
}

/** The part of a pino logger the proxy uses. */
export interface ProxyLog {
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
  debug(obj: object, msg?: string): void;
}

/** Options of `AppProxy`; only `publicHost`, `targets` and `log` are required. */
export interface AppProxyOptions {
  /** Host of PIER_PUBLIC_URL (`example.com`, `127.0.0.1:8080`); a port is ignored. */
  publicHost: string;
  /**
   * `PIER_APPS_DOMAIN`: apps answer at `<app>.<apps domain>` instead of under the public
   * host, which then names no app. Both stay off limits to apps' cookies.
   */
  appsDomain?: string;
  targets: ProxyTargets;
  log: ProxyLog;
  /** Give up connecting to one machine after this long (then try the next). Default 5 s. */
  connectTimeoutMs?: number;
  /** Answer 504 when a machine sends no response head within this long. Default 60 s. */
  responseTimeoutMs?: number;
  /**
   * Keep incoming X-Forwarded-* (append to X-Forwarded-For) because pier sits behind a
   * balancer that sets them. Default false: pier is the edge and replaces them, so a
   * client cannot spoof its address to the app.
   */
  trustForwarded?: boolean;
  /**
   * Names beyond default addresses (custom domains, `<app>.<zone>`), answered from
   * memory: called for every `Host` that is not a default address.
   */
  resolveHost?: (host: string, req: import('node:http').IncomingMessage) => AppAddress | undefined;
  /** Protection of apps (password, signed links): asked before anything is forwarded. */
  gate?: AccessGate;
}
