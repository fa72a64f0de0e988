/**
 * The TLS edge (CONTRACT 6 `PIER_TLS_LISTEN`): an HTTPS server for app traffic that
 * picks a certificate per name during the handshake (SNI) and hands every request and
 * upgrade to the same handlers as the plain listener's app traffic (the app proxy), so
 * everything the proxy enforces holds for HTTPS as well. HTTP/1.1; WebSockets as upgrades.
 * It also answers ACME TLS-ALPN-01 handshakes (RFC 8737) with the challenge certificate.
 */
import type http from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type tls from 'node:tls';
import { ACME_TLS_ALPN } from './acme.js';

export interface TlsEdgeOptions {
  host: string;
  port: number;
  /** The context for a server name, or undefined (the handshake then fails). */
  contextFor(servername: string): Promise<tls.SecureContext | undefined>;
  /** The TLS-ALPN-01 challenge context for a server name, if a challenge is in flight. */
  challengeFor(servername: string): Promise<tls.SecureContext | undefined>;
  onRequest(req: http.IncomingMessage, res: http.ServerResponse): void;
  onUpgrade(req: http.IncomingMessage, socket: Duplex, head: Buffer): void;
  onError?(err: unknown, servername: string): void;
}

export interface TlsEdge {
  port: number;
  close(): Promise<void>;
}

export async function startTlsEdge(opts: TlsEdgeOptions): Promise<TlsEdge> {
  /** Handshakes of an ACME CA's TLS-ALPN-01 validation, marked while ALPN is chosen. */
  const validations = new WeakSet<tls.TLSSocket>();
  const server = https.createServer({
    // OpenSSL picks the protocol before it asks for the certificate (both calls get the
    // socket as `this`), so the certificate can depend on it: the CA offers acme-tls/1
    // alone (RFC 8737). Others get HTTP/1.1; a client offering neither is refused.
    ALPNCallback(this: tls.TLSSocket, { protocols }) {
      if (protocols.length === 1 && protocols[0] === ACME_TLS_ALPN) {
        validations.add(this);
        return ACME_TLS_ALPN;
      }
      return protocols.includes('http/1.1') ? 'http/1.1' : undefined;
    },
    // Certificates come only from SNI; a client that names no server gets no certificate.
    SNICallback(this: tls.TLSSocket, servername, cb) {
      const name = servername.toLowerCase();
      const lookup = validations.has(this) ? opts.challengeFor(name) : opts.contextFor(name);
      lookup.then(
        (context) =>
          context ? cb(null, context) : cb(new Error(`no certificate for ${servername}`)),
        (err: Error) => {
          opts.onError?.(err, servername);
          cb(err);
        },
      );
    },
    keepAliveTimeout: 65_000,
  });
  // A validation ends with its handshake: it carries no HTTP.
  server.prependListener('secureConnection', (s: tls.TLSSocket) => {
    if (s.alpnProtocol === ACME_TLS_ALPN) s.destroy();
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
