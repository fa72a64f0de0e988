/**
 * Header rewriting between client and machine. Headers travel as flat raw arrays
 * (`[name, value, name, value, …]`, like `rawHeaders`) so duplicates and order survive
 * the hop; only hop-by-hop headers (RFC 9110 7.6.1) are dropped, since they describe
 * one connection and the proxy makes two.
 */
import type { IncomingMessage } from 'node:http';
import type { TLSSocket } from 'node:tls';
import { confineSetCookies, type CookieScope } from './set-cookie.js';

const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

/** Header names listed in `Connection` are hop-by-hop too (RFC 9110 7.6.1). */
function connectionTokens(raw: string[]): Set<string> {
  const named = new Set<string>();
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i]!.toLowerCase() !== 'connection') continue;
    for (const token of raw[i + 1]!.split(',')) {
      const t = token.trim().toLowerCase();
      if (t) named.add(t);
    }
  }
  return named;
}

/** `raw` without hop-by-hop headers and without the names in `alsoDrop`. */
export function endToEnd(raw: string[], alsoDrop: ReadonlySet<string> = new Set()): string[] {
  const named = connectionTokens(raw);
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    if (HOP_BY_HOP.has(name) || named.has(name) || alsoDrop.has(name)) continue;
    out.push(raw[i]!, raw[i + 1]!);
  }
  return out;
}

// Headers the proxy itself decides; what the client sent is dropped (or, trusted, merged).
// (`Forwarded` is dropped too when untrusted: pier does not set it, and a client's copy
// would be a spoof.) `Expect: 100-continue` was already answered by Node's server before
// the request reached us; passing it on would make the machine answer it a second time.
const TRUSTED_DROP = new Set([
  'x-forwarded-for',
  'x-forwarded-proto',
  'x-forwarded-host',
  'expect',
]);
const UNTRUSTED_DROP = new Set([...TRUSTED_DROP, 'forwarded']);

function first(raw: string[], name: string): string | undefined {
  for (let i = 0; i < raw.length; i += 2) if (raw[i]!.toLowerCase() === name) return raw[i + 1];
  return undefined;
}

function all(raw: string[], name: string): string[] {
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) if (raw[i]!.toLowerCase() === name) out.push(raw[i + 1]!);
  return out;
}

/**
 * The headers sent to the machine: end-to-end headers of the client (Host included, as
 * the app may route on it), plus X-Forwarded-For/-Proto/-Host. `upgrade` keeps the
 * `Connection: upgrade` / `Upgrade` pair, which a WebSocket handshake needs end to end.
 */
export function upstreamRequestHeaders(
  req: IncomingMessage,
  opts: { trustForwarded: boolean; upgrade?: boolean },
): string[] {
  const raw = req.rawHeaders;
  const out = endToEnd(raw, opts.trustForwarded ? TRUSTED_DROP : UNTRUSTED_DROP);
  const client = req.socket.remoteAddress ?? '';
  const proto = (req.socket as Partial<TLSSocket>).encrypted ? 'https' : 'http';
  const host = first(raw, 'host') ?? '';
  // Trusted: a balancer in front set these; keep its view and add the hop we saw.
  const prior = opts.trustForwarded ? all(raw, 'x-forwarded-for') : [];
  const fwdProto = (opts.trustForwarded && first(raw, 'x-forwarded-proto')) || proto;
  const fwdHost = (opts.trustForwarded && first(raw, 'x-forwarded-host')) || host;
  out.push('X-Forwarded-For', [...prior, client].join(', '));
  out.push('X-Forwarded-Proto', fwdProto, 'X-Forwarded-Host', fwdHost);
  if (opts.upgrade) {
    const upgrade = first(raw, 'upgrade');
    if (upgrade !== undefined) out.push('Connection', 'Upgrade', 'Upgrade', upgrade);
  }
  return out;
}

/**
 * The headers sent back to the client: the machine's end-to-end headers, in order, with
 * its cookies kept on the app's own host (set-cookie.ts).
 */
export function downstreamResponseHeaders(raw: string[], cookies: CookieScope): string[] {
  return confineSetCookies(endToEnd(raw), cookies);
}
