/**
 * The services listener: the same Fastify app (the API, and the S3 gateway under `/s3`)
 * over TLS, for machines. `PIER_LISTEN` stays where the operator put it (loopback by
 * default), which a machine cannot dial: the host's loopback is not the machine's. A
 * machine dials `https://SERVICES_HOST:SERVICES_PORT` instead and verifies the server
 * certificate (platformCa names the services host) with the CA it holds at
 * MACHINE_CA_PATH.
 *
 * It listens on the services host alone when that is an IP address, so nothing outside
 * the host reaches it through another interface. The default services host, the
 * machines' bridge gateway, exists only once the machine runtime has made the bridge,
 * possibly long after start: until then the listener waits, and binds when the runtime
 * says the bridge is up (`bind`, called before any machine joins it), or at its own
 * retry every BIND_RETRY_MS. A services host given as a DNS name (machines on other hosts
 * dial it) has no one address: then it listens on every interface.
 */
import { createServer, type Server } from 'node:https';
import { readFile } from 'node:fs/promises';
import { createServer as createTcpServer, isIP, type AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { Config } from '../config.js';

/** How often a listener waiting for its address tries again on its own. */
const BIND_RETRY_MS = 2000;

export interface ServicesListener {
  /** The port it listens on (the configured one, or the one chosen for port 0). */
  port: number;
  /** Where it listens now; undefined while it waits for its address to exist. */
  address(): AddressInfo | undefined;
  /** Binds now if it waits for its address (the machines' bridge was just made). */
  bind(): Promise<void>;
  close(): Promise<void>;
}

/** A port free now, for a port 0 bound later (tests). */
async function freePort(): Promise<number> {
  const probe = createTcpServer();
  await new Promise<void>((resolve, reject) => {
    probe.once('error', reject);
    probe.listen({ host: '127.0.0.1', port: 0 }, resolve);
  });
  const { port } = probe.address() as AddressInfo;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return port;
}

export async function startServicesListener(
  app: FastifyInstance,
  config: Pick<Config, 'servicesHost' | 'servicesPort'>,
  tls: { certFile: string; keyFile: string },
  log: Logger,
): Promise<ServicesListener> {
  const [cert, key] = await Promise.all([readFile(tls.certFile), readFile(tls.keyFile)]);
  // Requests go to the app's own server, so hooks, routes and the S3 gateway are one.
  const server: Server = createServer({ cert, key }, (req, res) => {
    app.server.emit('request', req, res);
  });
  server.on('tlsClientError', (err) => log.debug({ err }, 'services listener: TLS failed'));
  const host = config.servicesHost.replace(/^\[|\]$/g, '');
  const bindHost = isIP(host) ? host : '0.0.0.0';
  let port = config.servicesPort;
  let bound = false;
  let closed = false;

  /** One attempt: true once bound, false while the address does not exist on the host. */
  const listen = () =>
    new Promise<boolean>((resolve, reject) => {
      const failed = (err: NodeJS.ErrnoException) => {
        if (err.code === 'EADDRNOTAVAIL') return resolve(false);
        reject(
          err.code === 'EADDRINUSE'
            ? new Error(
                `the services listener's port ${port} is taken; choose another with PIER_SERVICES_PORT`,
              )
            : err,
        );
      };
      server.once('error', failed);
      server.listen({ host: bindHost, port }, () => {
        server.off('error', failed);
        resolve(true);
      });
    });

  let attempt: Promise<void> | undefined;
  const bind = (): Promise<void> => {
    if (bound || closed) return Promise.resolve();
    attempt ??= listen()
      .then((ok) => {
        bound = ok;
        if (ok) {
          clearInterval(retry);
          log.info({ host: bindHost, port }, 'the services listener is serving');
        }
      })
      .finally(() => (attempt = undefined));
    return attempt;
  };

  let retry: NodeJS.Timeout | undefined;
  bound = await listen();
  if (!bound) {
    // The address comes with the machines' bridge: wait for it, with the port fixed now
    // (URLs handed to machines carry it).
    if (port === 0) port = await freePort();
    log.info(
      { host: bindHost, port },
      'the services listener waits for its address (the machines bridge, made with the first machine)',
    );
    retry = setInterval(() => {
      bind().catch((err: Error) => log.warn({ err }, 'services listener: bind failed'));
    }, BIND_RETRY_MS);
    retry.unref();
  } else {
    port = (server.address() as AddressInfo).port;
  }
  return {
    port,
    address: () => (bound ? (server.address() as AddressInfo) : undefined),
    bind,
    close: () =>
      new Promise<void>((resolve) => {
        closed = true;
        clearInterval(retry);
        if (!bound) return resolve();
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
