/**
 * The outbound guard: every connection pier makes for a customer (image pulls, registry
 * token realms and the redirects they send, later webhook deliveries and domain checks)
 * goes through one of these, so that a customer cannot point pier at this host, at the
 * private network around it or at a cloud's metadata service (SSRF).
 *
 * What it does, per connection:
 * 1. Resolves the name itself (`dns.lookup`, all addresses; an IP literal is taken as is).
 * 2. Refuses when ANY resolved address is loopback, private (RFC 1918, fc00::/7),
 *    link-local (169.254/16, fe80::/10, which hold the metadata addresses), shared
 *    (CGNAT 100.64/10), unspecified (0/8, ::), multicast, documentation or otherwise
 *    reserved, IPv4-mapped (::ffff:a.b.c.d), NAT64 and 6to4 forms judged by the IPv4
 *    address inside; IPv6 outside global unicast 2000::/3 is refused as reserved.
 *    Unless the guard allows private targets (`PIER_ALLOW_PRIVATE_TARGETS=1`), or the
 *    target's `host:port` (or `host`, any port) is one the operator trusts
 *    (`PIER_TRUSTED_REGISTRIES`).
 * 3. Connects to exactly the addresses it checked: the request's `lookup` answers with
 *    them and never asks DNS again, so a name that resolves to a public address for the
 *    check and to 127.0.0.1 a moment later (DNS rebinding) cannot win.
 *
 * API:
 * - `check(url)`: resolve and judge; the vetted addresses, or OutboundRefused.
 * - `fetch(url, init)`: a small fetch over node:http(s) that runs `check` and connects to
 *   what it checked, for every hop: a redirect's Location goes through the guard again
 *   (`redirect: 'manual'` hands 3xx back, for callers that follow redirects themselves).
 *   Failures other than a refusal reject as fetch does: TypeError('fetch failed', {cause}).
 * - `lookup`: a `dns.lookup`-shaped function for `http.request`, `net.connect` and kin
 *   that resolves and judges at connect time. It sees only the name, so it honours
 *   trusted entries without a port, and `allowPrivate`.
 * - `classifyAddress(ip)`: why an address is refused (a phrase), or undefined.
 *
 * A refusal is an OutboundRefused, `code` 'target-refused', whose message names the
 * target, the address and why, and says how an operator can allow it.
 */
import dns from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import net, { type LookupFunction } from 'node:net';
import { Readable } from 'node:stream';

/** One resolved address. */
export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

/** Resolves a name to all its addresses (the guard's default is `dns.lookup`, all: true). */
export type Resolver = (hostname: string) => Promise<ResolvedAddress[]>;

export interface OutboundGuardOptions {
  /** Let every target through (`PIER_ALLOW_PRIVATE_TARGETS=1`): tests and closed networks. */
  allowPrivate?: boolean;
  /**
   * Targets allowed whatever they resolve to: `host:port` (that port only) or `host` (any
   * port); IPv6 as `[::1]:5000`. `PIER_TRUSTED_REGISTRIES`.
   */
  trusted?: readonly string[];
  /** How names are resolved; tests inject a fake so no real DNS is needed. */
  resolve?: Resolver;
}

/** The init of {@link OutboundGuard.fetch}: the parts of fetch's RequestInit pier uses. */
export interface GuardedRequestInit {
  method?: string;
  headers?: Record<string, string>;
  body?: string | Uint8Array;
  signal?: AbortSignal;
  /** `follow` (default): each hop is checked again; `manual`: 3xx answers are returned. */
  redirect?: 'follow' | 'manual' | 'error';
}

/** A target the guard let through, and the addresses a connection to it may use. */
export interface CheckedTarget {
  /** The name or literal to connect to (IPv6 without brackets). */
  hostname: string;
  port: number;
  addresses: ResolvedAddress[];
  /** True when the target is trusted (or private targets are allowed): not judged. */
  trusted: boolean;
}

/** The stable code of a refusal, for callers that branch on it. */
export const TARGET_REFUSED = 'target-refused';

/** A connection the guard refused. */
export class OutboundRefused extends Error {
  override readonly name = 'OutboundRefused';
  readonly code = TARGET_REFUSED;

  constructor(
    /** `host:port` as asked for. */
    readonly target: string,
    /** The address that made it refuse. */
    readonly address: string,
    /** Why, as a phrase: `a private address`. */
    readonly reason: string,
  ) {
    super(
      `Connecting to ${target} is refused: ${address} is ${reason}; an operator can allow it with PIER_ALLOW_PRIVATE_TARGETS=1 or PIER_TRUSTED_REGISTRIES.`,
    );
  }
}

const MAX_REDIRECTS = 5;
const REDIRECTS = new Set([301, 302, 303, 307, 308]);
const DEFAULT_PORTS: Record<string, number> = {
  'http:': 80,
  'https:': 443,
  'ws:': 80,
  'wss:': 443,
};

// ---------------------------------------------------------------------------------------
// Address ranges

/** Well-known metadata services (cloud instance metadata); named as such in refusals. */
const METADATA = new Set([
  '169.254.169.254', // AWS, GCP, Azure, OpenStack, DigitalOcean, ...
  '169.254.170.2', // AWS ECS task metadata
  '169.254.169.123', // AWS time sync
  '100.100.100.200', // Alibaba Cloud
  '192.0.0.192', // Oracle Cloud
  'fd00:ec2::254', // AWS IPv6 metadata
]);

type V4Rule = [base: string, bits: number, reason: string];

/** IPv4 ranges refused (IANA special-purpose registry, plus multicast and class E). */
const V4_RULES: V4Rule[] = [
  ['0.0.0.0', 8, 'an unspecified ("this network") address'],
  ['10.0.0.0', 8, 'a private address'],
  ['100.64.0.0', 10, 'a shared (CGNAT) address'],
  ['127.0.0.0', 8, 'a loopback address'],
  ['169.254.0.0', 16, 'a link-local address'],
  ['172.16.0.0', 12, 'a private address'],
  ['192.0.0.0', 24, 'a reserved address'],
  ['192.0.2.0', 24, 'a documentation address'],
  ['192.88.99.0', 24, 'a reserved address'],
  ['192.168.0.0', 16, 'a private address'],
  ['198.18.0.0', 15, 'a benchmarking address'],
  ['198.51.100.0', 24, 'a documentation address'],
  ['203.0.113.0', 24, 'a documentation address'],
  ['224.0.0.0', 4, 'a multicast address'],
  ['240.0.0.0', 4, 'a reserved address'],
];

/**
 * The same IPv4 ranges as `a.b.c.d/p`, for the machines' egress walls
 * (runtime/sandbox/walls-ruleset.ts): what pier refuses to call, machines cannot reach.
 */
export const REFUSED_V4_RANGES: readonly string[] = V4_RULES.map(([b, bits]) => `${b}/${bits}`);

function v4ToInt(ip: string): number {
  return ip.split('.').reduce((n, part) => n * 256 + Number(part), 0);
}

const V4_COMPILED = V4_RULES.map(([base, bits, reason]) => {
  const size = 2 ** (32 - bits);
  const start = v4ToInt(base);
  return { start, end: start + size - 1, reason };
});

/** The eight 16-bit groups of an IPv6 address (dotted IPv4 tail allowed), or undefined. */
function v6Groups(ip: string): number[] | undefined {
  let text = ip.toLowerCase();
  let tail: number[] = [];
  const dotted = /^(.*:)(\d{1,3}(?:\.\d{1,3}){3})$/.exec(text);
  if (dotted) {
    if (!net.isIPv4(dotted[2]!)) return undefined;
    const n = v4ToInt(dotted[2]!);
    tail = [Math.floor(n / 65536), n % 65536];
    // "::ffff:" → "::ffff", "::" stays: the groups before the IPv4 part.
    text = dotted[1]!.endsWith('::') ? dotted[1]! : dotted[1]!.slice(0, -1);
  }
  const halves = text.split('::');
  if (halves.length > 2) return undefined;
  const parse = (s: string) => (s === '' ? [] : s.split(':').map((h) => parseInt(h, 16)));
  const head = parse(halves[0]!);
  const rest = halves.length === 2 ? parse(halves[1]!) : [];
  const known = head.length + rest.length + tail.length;
  if (known > 8 || (halves.length === 1 && known !== 8)) return undefined;
  const groups = [...head, ...Array<number>(8 - known).fill(0), ...rest, ...tail];
  return groups.every((g) => Number.isInteger(g) && g >= 0 && g <= 0xffff) ? groups : undefined;
}

function groupsToBig(g: number[]): bigint {
  return g.reduce((n, x) => (n << 16n) | BigInt(x), 0n);
}

function inV6(value: bigint, base: string, bits: number): boolean {
  const b = groupsToBig(v6Groups(base)!);
  const shift = BigInt(128 - bits);
  return value >> shift === b >> shift;
}

function v4FromBits(value: bigint, shiftRight: number): string {
  const n = Number((value >> BigInt(shiftRight)) & 0xffffffffn);
  return [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');
}

type V6Rule = [base: string, bits: number, reason: string];

/** IPv6 ranges refused, checked after the forms that embed an IPv4 address. */
const V6_RULES: V6Rule[] = [
  ['::', 128, 'an unspecified address'],
  ['::1', 128, 'a loopback address'],
  ['::', 96, 'a reserved (IPv4-compatible) address'],
  ['64:ff9b:1::', 48, 'a reserved (local NAT64) address'],
  ['100::', 64, 'a reserved (discard-only) address'],
  ['2001::', 23, 'a reserved (IETF protocol assignment) address'],
  ['2001:db8::', 32, 'a documentation address'],
  ['3fff::', 20, 'a documentation address'],
  ['fc00::', 7, 'a private (unique local) address'],
  ['fe80::', 10, 'a link-local address'],
  ['fec0::', 10, 'a private (site-local) address'],
  ['ff00::', 8, 'a multicast address'],
];

function classifyV4(ip: string): string | undefined {
  if (METADATA.has(ip)) return 'a cloud metadata address';
  const n = v4ToInt(ip);
  return V4_COMPILED.find((r) => n >= r.start && n <= r.end)?.reason;
}

/**
 * Why `ip` may not be reached, as a phrase (`a loopback address`), or undefined when it
 * is an ordinary public address. Anything that is not an IP address is refused.
 */
export function classifyAddress(ip: string): string | undefined {
  const bare = ip.replace(/^\[|\]$/g, '').replace(/%.*$/, '');
  if (net.isIPv4(bare)) return classifyV4(bare);
  if (!net.isIPv6(bare)) return 'not an IP address';
  const groups = v6Groups(bare);
  if (!groups) return 'not an IP address';
  const value = groupsToBig(groups);
  const embedded = (v4: string, form: string) => {
    const why = classifyV4(v4);
    return why ? `${why.replace(/ address$/, '')} address (${form} ${v4})` : undefined;
  };
  if (inV6(value, '::ffff:0:0', 96)) return embedded(v4FromBits(value, 0), 'IPv4-mapped');
  if (inV6(value, '64:ff9b::', 96)) return embedded(v4FromBits(value, 0), 'NAT64 of');
  if (inV6(value, '2002::', 16)) return embedded(v4FromBits(value, 80), '6to4 of');
  if (METADATA.has(v6Canonical(groups))) return 'a cloud metadata address';
  for (const [base, bits, reason] of V6_RULES) if (inV6(value, base, bits)) return reason;
  if (!inV6(value, '2000::', 3)) return 'a reserved address (outside global unicast)';
  return undefined;
}

function v6Canonical(groups: number[]): string {
  // Enough to compare with the METADATA entries: zero runs compressed the usual way.
  const hex = groups.map((g) => g.toString(16));
  let best = { at: -1, len: 0 };
  for (let i = 0; i < 8;) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > best.len && j - i > 1) best = { at: i, len: j - i };
    i = j;
  }
  if (best.at < 0) return hex.join(':');
  return `${hex.slice(0, best.at).join(':')}::${hex.slice(best.at + best.len).join(':')}`;
}

// ---------------------------------------------------------------------------------------
// Trusted targets

interface TrustedEntry {
  host: string;
  port?: number;
}

const trustedPattern = /^(?<host>\[[0-9a-fA-F:.]+\]|[^:[\]\s/]+)(?::(?<port>\d{1,5}))?$/;

/** Parses one trusted entry (`host`, `host:port`, `[v6]:port`); throws when malformed. */
export function parseTrustedTarget(entry: string): TrustedEntry {
  const m = trustedPattern.exec(entry.trim());
  const port = m?.groups?.port === undefined ? undefined : Number(m.groups.port);
  if (!m || (port !== undefined && (port < 1 || port > 65535))) {
    throw new Error(`invalid trusted target ${JSON.stringify(entry)}: expected HOST or HOST:PORT`);
  }
  const host = m.groups!.host!.toLowerCase().replace(/^\[|\]$/g, '');
  return port === undefined ? { host } : { host, port };
}

// ---------------------------------------------------------------------------------------
// The guard

function defaultResolve(hostname: string): Promise<ResolvedAddress[]> {
  return dns.promises
    .lookup(hostname, { all: true, verbatim: true })
    .then((list) => list.map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 })));
}

function notFound(hostname: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), {
    code: 'ENOTFOUND',
    hostname,
  });
}

/** A `lookup` that answers only with `addresses` (already checked): no second resolution. */
function pinnedLookup(addresses: ResolvedAddress[]): LookupFunction {
  return (hostname, options, callback) => {
    const family =
      options.family === 'IPv4' ? 4 : options.family === 'IPv6' ? 6 : Number(options.family ?? 0);
    const list = family ? addresses.filter((a) => a.family === family) : addresses;
    if (list.length === 0) return callback(notFound(hostname), '', 0);
    if (options.all) return callback(null, list);
    return callback(null, list[0]!.address, list[0]!.family);
  };
}

/** See the file's comment. One per policy; safe to share. */
export class OutboundGuard {
  private readonly allowPrivate: boolean;
  private readonly trusted: TrustedEntry[];
  private readonly resolveName: Resolver;

  constructor(opts: OutboundGuardOptions = {}) {
    this.allowPrivate = opts.allowPrivate ?? false;
    this.trusted = (opts.trusted ?? []).map(parseTrustedTarget);
    this.resolveName = opts.resolve ?? defaultResolve;
  }

  /** True when `hostname` (and `port`, when known) is trusted or private targets are allowed. */
  private isTrusted(hostname: string, port: number | undefined): boolean {
    if (this.allowPrivate) return true;
    const host = hostname.toLowerCase().replace(/^\[|\]$/g, '');
    return this.trusted.some(
      (t) => t.host === host && (t.port === undefined || (port !== undefined && t.port === port)),
    );
  }

  /** Resolves `hostname` and refuses it unless every address is public (or it is trusted). */
  private async vet(
    hostname: string,
    port: number | undefined,
    target: string,
  ): Promise<{ addresses: ResolvedAddress[]; trusted: boolean }> {
    const bare = hostname.replace(/^\[|\]$/g, '');
    const family = net.isIP(bare);
    const addresses: ResolvedAddress[] = family
      ? [{ address: bare, family: family === 6 ? 6 : 4 }]
      : await this.resolveName(bare);
    if (addresses.length === 0) throw notFound(bare);
    const trusted = this.isTrusted(bare, port);
    if (!trusted) {
      for (const a of addresses) {
        const why = classifyAddress(a.address);
        if (why) throw new OutboundRefused(target, a.address, why);
      }
    }
    return { addresses, trusted };
  }

  /**
   * Resolves the URL's host and judges every address. Resolves to the addresses a
   * connection may use; rejects with OutboundRefused, or with the resolver's error
   * (ENOTFOUND and kin) when the name does not resolve.
   */
  async check(target: string | URL): Promise<CheckedTarget> {
    const url = typeof target === 'string' ? new URL(target) : target;
    const hostname = url.hostname.replace(/^\[|\]$/g, '');
    if (!hostname) throw new TypeError(`${url.href} names no host`);
    const port = url.port ? Number(url.port) : DEFAULT_PORTS[url.protocol];
    const { addresses, trusted } = await this.vet(hostname, port, url.host);
    return { hostname, port: port ?? 0, addresses, trusted };
  }

  /**
   * A `dns.lookup` replacement for `http.request({lookup})`, `net.connect({lookup})` and
   * kin: resolves, judges and answers with the checked addresses. IP literals never reach
   * a lookup function, so check them with {@link check} first (or use {@link fetch}).
   */
  readonly lookup: LookupFunction = (hostname, options, callback) => {
    this.vet(hostname, undefined, hostname).then(
      ({ addresses }) => pinnedLookup(addresses)(hostname, options, callback),
      (err: NodeJS.ErrnoException) => callback(err, '', 0),
    );
  };

  /**
   * fetch through the guard (see the file's comment). Answers a standard Response; the
   * body streams. Each hop connects to the addresses just checked for it.
   */
  async fetch(input: string | URL, init: GuardedRequestInit = {}): Promise<Response> {
    let url = new URL(String(input));
    let method = (init.method ?? 'GET').toUpperCase();
    let body = init.body;
    let headers: Record<string, string> = { ...init.headers };
    const mode = init.redirect ?? 'follow';
    for (let hop = 0; ; hop++) {
      const response = await this.once(url, method, headers, body, init.signal);
      const location = response.headers.get('location');
      if (mode === 'manual' || !REDIRECTS.has(response.status) || !location) return response;
      await response.body?.cancel().catch(() => undefined);
      if (mode === 'error') throw new TypeError(`fetch failed: ${url.host} redirected`);
      if (hop >= MAX_REDIRECTS) throw new TypeError(`fetch failed: too many redirects`);
      const next = new URL(location, url);
      if (response.status === 303 || (response.status <= 302 && method === 'POST')) {
        method = 'GET';
        body = undefined;
        headers = without(headers, ['content-type', 'content-length']);
      }
      if (next.origin !== url.origin) {
        headers = without(headers, ['authorization', 'cookie', 'proxy-authorization']);
      }
      url = next;
    }
  }

  /** One request, no redirects: check, then connect to the checked addresses. */
  private async once(
    url: URL,
    method: string,
    headers: Record<string, string>,
    body: string | Uint8Array | undefined,
    signal: AbortSignal | undefined,
  ): Promise<Response> {
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      throw new TypeError(`fetch failed: ${url.protocol} is not supported`);
    }
    signal?.throwIfAborted();
    let target: CheckedTarget;
    try {
      target = await abortable(this.check(url), signal);
    } catch (err) {
      if (signal?.aborted) throw signal.reason;
      if (err instanceof OutboundRefused) throw err;
      throw new TypeError('fetch failed', { cause: err });
    }
    signal?.throwIfAborted();
    return new Promise<Response>((resolve, reject) => {
      const request = (url.protocol === 'https:' ? https : http).request(
        {
          host: target.hostname,
          port: target.port,
          path: `${url.pathname}${url.search}`,
          method,
          headers,
          agent: false,
          lookup: pinnedLookup(target.addresses),
          ...(signal ? { signal } : {}),
        },
        (res) => {
          const status = res.statusCode ?? 0;
          const answer = new Headers();
          for (let i = 0; i + 1 < res.rawHeaders.length; i += 2) {
            answer.append(res.rawHeaders[i]!, res.rawHeaders[i + 1]!);
          }
          const empty = method === 'HEAD' || status === 204 || status === 304;
          // Errors after the answer (an abort, a reset) reach the reader through the body.
          res.on('error', () => undefined);
          if (signal) {
            const onAbort = () => res.destroy(signal.reason as Error);
            signal.addEventListener('abort', onAbort, { once: true });
            res.once('close', () => signal.removeEventListener('abort', onAbort));
          }
          if (empty) res.resume();
          try {
            const stream = empty ? null : (Readable.toWeb(res) as unknown as ReadableStream);
            resolve(
              new Response(stream, {
                status,
                statusText: res.statusMessage ?? '',
                headers: answer,
              }),
            );
          } catch (err) {
            res.destroy();
            reject(new TypeError('fetch failed', { cause: err }));
          }
        },
      );
      request.on('error', (err) => {
        reject(signal?.aborted ? signal.reason : new TypeError('fetch failed', { cause: err }));
      });
      request.end(body);
    });
  }
}

function without(headers: Record<string, string>, names: string[]): Record<string, string> {
  return Object.fromEntries(
    Object.entries(headers).filter(([k]) => !names.includes(k.toLowerCase())),
  );
}

/** `work`, or the signal's reason as soon as it aborts (a slow resolver must not hang us). */
function abortable<T>(work: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return work;
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    void work.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}
