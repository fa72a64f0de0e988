/**
 * The TLS edge (CONTRACT 6 `PIER_TLS_LISTEN`): an HTTPS server for app traffic that
 * picks a certificate per name during the handshake (SNI) and hands every request and
 * upgrade to the same handlers as the plain listener's app traffic (the app proxy), so
 * everything the proxy enforces holds for HTTPS as well. HTTP/1.1; WebSockets as upgrades.
 */
import type http from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type tls from 'node:tls';

export interface TlsEdgeOptions {
  host: string;
  port: number;
  /** The context for a server name, or undefined (the handshake then fails). */
  contextFor(servername: string): Promise<tls.SecureContext | undefined>;
  onRequest(req: http.IncomingMessage, res: http.ServerResponse): void;
  onUpgrade(req: http.IncomingMessage, socket: Duplex, head: Buffer): void;
  onError?(err: unknown, servername: string): void;
}

export interface TlsEdge {
  port: number;
  close(): Promise<void>;
}

export async function startTlsEdge(opts: TlsEdgeOptions): Promise<TlsEdge> {
  const server = https.createServer({
    // Certificates come only from SNI; a client that names no server gets no certificate.
    SNICallback: (servername, cb) => {
      opts.contextFor(servername.toLowerCase()).then(
        (context) =>
          context ? cb(null, context) : cb(new Error(`no certificate for ${servername}`)),
        (err: Error) => {
          opts.onError?.(err, servername);
          cb(err);
        },
      );
    },
    ALPNProtocols: ['http/1.1'],
    keepAliveTimeout: 65_000,
  });
  const sockets = new Set<Socket | Duplex>();
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
  });
  server.on('request', opts.onRequest);
  server.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
    opts.onUpgrade(req, socket, head);
  });
  // A client that gives up mid-handshake is not an error of the edge.
  server.on('tlsClientError', () => undefined);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : opts.port;
  return {
    port,
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      // Tunnels and kept-alive connections: the edge's shutdown ends them.
      for (const s of sockets) s.destroy();
      await closed;
    },
  };
}
