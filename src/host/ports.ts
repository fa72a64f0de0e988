/**
 * Ports of the host. Fronts (the ports customers connect to) come from a configured
 * range and are probed by binding, because other programs, and other pier installations
 * on the same machine, may hold some of them. Servers' internal loopback ports are
 * whatever the kernel hands out: nobody outside the host ever needs to know them.
 */
import net from 'node:net';

/** An inclusive port range, `FROM-TO`. */
export interface PortRange {
  from: number;
  to: number;
}

export function parsePortRange(text: string): PortRange {
  const m = /^(\d{1,5})-(\d{1,5})$/.exec(text.trim());
  const from = Number(m?.[1]);
  const to = Number(m?.[2]);
  if (!m || from < 1 || to > 65535 || from > to) {
    throw new Error(`invalid port range ${JSON.stringify(text)}: expected FROM-TO within 1-65535`);
  }
  return { from, to };
}

/**
 * Candidate ports of `range` in an order that starts at a random place, so that several
 * installations on one machine (tests) rarely probe the same port at the same moment.
 */
export function* candidatePorts(range: PortRange, skip: Set<number>): Generator<number> {
  const size = range.to - range.from + 1;
  const start = Math.floor(Math.random() * size);
  for (let i = 0; i < size; i++) {
    const port = range.from + ((start + i) % size);
    if (!skip.has(port)) yield port;
  }
}

/** A loopback port that was free a moment ago (the kernel's choice). */
export function freeLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.once('error', reject);
    server.listen({ host: '127.0.0.1', port: 0, exclusive: true }, () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}
