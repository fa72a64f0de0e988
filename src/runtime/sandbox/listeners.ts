/**
 * Whether a machine listens on a TCP port, read from the kernel's socket tables of its
 * network namespace (`/proc/<pid>/net/tcp` and `tcp6` of a process inside it) instead of
 * connecting: a connection would be one more new connection the machine's network policy
 * counts (`newConnectionsPerMinute`), and costs a handshake per machine every few
 * seconds. Only for machines whose sockets are the host kernel's (runc); under gVisor the
 * machine's sockets live in its own netstack and these tables are empty.
 */
import { readFile } from 'node:fs/promises';
import { endianness } from 'node:os';

/** The `st` column of a socket in LISTEN. */
const LISTEN = '0A';

/** One listening socket: its local address (dotted IPv4 or IPv6 text) and port. */
export interface ListeningSocket {
  address: string;
  port: number;
}

/** The 4-byte words of /proc's hex addresses are in host byte order. */
function wordBytes(hex8: string): number[] {
  const bytes = [0, 2, 4, 6].map((i) => parseInt(hex8.slice(i, i + 2), 16));
  return endianness() === 'LE' ? bytes.reverse() : bytes;
}

/** An address of /proc/net/tcp (8 hex digits) or tcp6 (32), as text. */
function addressOf(hex: string): string {
  const bytes = [];
  for (let i = 0; i < hex.length; i += 8) bytes.push(...wordBytes(hex.slice(i, i + 8)));
  if (bytes.length === 4) return bytes.join('.');
  const mapped = bytes.slice(0, 10).every((b) => b === 0) && bytes[10] === 255 && bytes[11] === 255;
  if (mapped) return `::ffff:${bytes.slice(12).join('.')}`;
  const groups = [];
  for (let i = 0; i < 16; i += 2) groups.push(((bytes[i]! << 8) | bytes[i + 1]!).toString(16));
  const text = groups.join(':');
  return text === '0:0:0:0:0:0:0:0' ? '::' : text;
}

/** The LISTEN sockets of a /proc/net/tcp or tcp6 table. */
export function parseListeners(table: string): ListeningSocket[] {
  const found: ListeningSocket[] = [];
  for (const line of table.split('\n').slice(1)) {
    const cols = line.trim().split(/\s+/);
    const [local, state] = [cols[1], cols[3]];
    if (state !== LISTEN || !local?.includes(':')) continue;
    const [hex, port] = local.split(':') as [string, string];
    if (hex.length !== 8 && hex.length !== 32) continue;
    found.push({ address: addressOf(hex), port: parseInt(port, 16) });
  }
  return found;
}

/** Addresses that accept connections made to `ip` (the machine's own address). */
const reachable = (address: string, ip: string) =>
  ['0.0.0.0', '::', ip, `::ffff:${ip}`].includes(address);

/**
 * Whether the netns of process `pid` has a socket listening on `port` that connections
 * to `ip` reach; when not, why (nothing listens, or only on other addresses such as
 * 127.0.0.1). Undefined when the tables cannot be read (the process is gone).
 */
export async function listensOn(
  pid: number,
  ip: string,
  port: number,
): Promise<{ listening: true } | { listening: false; reason: string } | undefined> {
  const tables = await Promise.all(
    ['tcp', 'tcp6'].map((t) => readFile(`/proc/${pid}/net/${t}`, 'utf8').catch(() => undefined)),
  );
  if (tables[0] === undefined) return undefined;
  const onPort = tables.flatMap((t) => (t ? parseListeners(t) : [])).filter((s) => s.port === port);
  if (onPort.some((s) => reachable(s.address, ip))) return { listening: true };
  if (onPort.length === 0) return { listening: false, reason: `nothing listens on port ${port}` };
  const where = [...new Set(onPort.map((s) => s.address))].join(', ');
  return {
    listening: false,
    reason: `port ${port} listens only on ${where}, not on the machine's address`,
  };
}
