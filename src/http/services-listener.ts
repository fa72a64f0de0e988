/**
 * The services listener: the same Fastify app (the API, and the S3 gateway under `/s3`)
 * over TLS, for machines. `PIER_LISTEN` stays where the operator put it (loopback by
 * default), which a machine cannot dial: the host's loopback is not the machine's. A
 * machine dials `https://SERVICES_HOST:SERVICES_PORT` instead and verifies the server
 * certificate (platformCa names the services host) with the CA it holds at
 * MACHINE_CA_PATH.
 *
 * It binds every address rather than the services host itself, because the default
 * services host (the bridge's gateway) only exists once the machine runtime has made the
 * bridge, possibly long after start. When the services host is an IP address, a
 * connection that arrived on any other address of the host is dropped at once, so the
 * listener answers only there.
 */
import { createServer, type Server } from 'node:https';
import { readFile } from 'node:fs/promises';
import { isIP, isIPv6, type Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { Config } from '../config.js';

export interface ServicesListener {
  /** The port it listens on (the configured one, or the one chosen for port 0). */
  port: number;
  close(): Promise<void>;
}

/** `::ffff:10.0.0.1` (an IPv4 peer on a dual-stack socket) as `10.0.0.1`. */
function plainAddress(address: string | undefined): string {
  return (address ?? '').replace(/^::ffff:(?=\d+\.)/, '');
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
  const host = config.servicesHost.replace(/^\[|\]$/g, '');
  if (isIP(host)) {
    server.on('connection', (socket: Socket) => {
      if (plainAddress(socket.localAddress) !== host) socket.destroy();
    });
  }
  server.on('tlsClientError', (err) => log.debug({ err }, 'services listener: TLS failed'));
  await new Promise<void>((resolve, reject) => {
    const failed = (err: NodeJS.ErrnoException) =>
      reject(
        err.code === 'EADDRINUSE'
          ? new Error(
              `the services listener's port ${config.servicesPort} is taken; choose another with PIER_SERVICES_PORT`,
            )
          : err,
      );
    server.once('error', failed);
    server.listen({ host: isIPv6(host) ? '::' : '0.0.0.0', port: config.servicesPort }, () => {
      server.off('error', failed);
      resolve();
    });
  });
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : config.servicesPort;
  return {
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
