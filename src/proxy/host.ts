/**
 * Which app (and which exposed port) a `Host` header names.
 *
 * `<app>.<public host>` reaches the app's internalPort; `<port>.<app>.<public host>`
 * reaches one of its exposePorts. The port goes in a label of its own, left of the app,
 * because app names may themselves end in `-<digits>` (`<app>-<port>` would let the
 * owner of an app `shop-8080` capture traffic meant for port 8080 of `shop`).
 */

/** An app address: the app, and the exposed port when the host names one. */
export interface AppAddress {
  app: string;
  port?: number;
  /** Answer with a 308 to this URL instead of proxying (custom domains, HTTP→HTTPS). */
  redirect?: string;
}

const APP_LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;
const PORT_LABEL = /^[1-9][0-9]{0,4}$/;

/**
 * The host name part of `publicHost`, lower-cased, without port or trailing dot.
 * Accepts `example.com`, `example.com:8080`, `[::1]:8080` or a whole URL.
 */
export function normalizePublicHost(publicHost: string): string {
  let host = publicHost.trim().toLowerCase();
  if (host.includes('://')) host = new URL(host).host;
  return stripPort(host).replace(/\.$/, '');
}

/** Drops `:port` from a host, leaving IPv6 literals (`[::1]`) intact. */
function stripPort(host: string): string {
  if (host.startsWith('[')) {
    const end = host.indexOf(']');
    return end === -1 ? host : host.slice(0, end + 1);
  }
  const colon = host.indexOf(':');
  return colon === -1 ? host : host.slice(0, colon);
}

/** The host name of a `Host` header: lower case, without port or trailing dot. */
export function hostName(hostHeader: string): string {
  return stripPort(hostHeader.toLowerCase()).replace(/\.$/, '');
}

/**
 * Parses a `Host` header against the normalized public host. The port of the header is
 * ignored: behind a balancer the public port and the listener's port differ, and
 * `Host` names the listener's host either way. Anything that is not exactly one app
 * label (optionally preceded by one port label) under the public host is not an app
 * address: the API's own host, other domains, deeper names.
 */
export function parseAppHost(
  hostHeader: string | undefined,
  publicHost: string,
): AppAddress | undefined {
  if (!hostHeader) return undefined;
  const host = hostName(hostHeader);
  const suffix = '.' + publicHost;
  if (host.length <= suffix.length || !host.endsWith(suffix)) return undefined;
  const labels = host.slice(0, -suffix.length).split('.');
  if (labels.length === 1) {
    const app = labels[0]!;
    return APP_LABEL.test(app) ? { app } : undefined;
  }
  if (labels.length === 2) {
    const [portLabel, app] = labels as [string, string];
    if (!PORT_LABEL.test(portLabel) || !APP_LABEL.test(app)) return undefined;
    const port = Number(portLabel);
    return port <= 65535 ? { app, port } : undefined;
  }
  return undefined;
}
