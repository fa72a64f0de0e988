/**
 * Percent-decoding and SigV4's `UriEncode`. The server canonicalizes from what arrived on the
 * wire, so it decodes the client's escapes to bytes and re-encodes them with AWS's rules: the
 * same key then yields the same canonical form whichever equivalent escaping the client chose
 * (`%7E` or `~`, `%2f` or `%2F`).
 */
import { SigV4Error } from './errors.js';

const HEX = '0123456789ABCDEF';

/** RFC 3986 unreserved characters, the only bytes `UriEncode` leaves alone. */
function isUnreserved(byte: number): boolean {
  return (
    (byte >= 0x41 && byte <= 0x5a) || // A-Z
    (byte >= 0x61 && byte <= 0x7a) || // a-z
    (byte >= 0x30 && byte <= 0x39) || // 0-9
    byte === 0x2d || // -
    byte === 0x2e || // .
    byte === 0x5f || // _
    byte === 0x7e // ~
  );
}

/** AWS `UriEncode` over raw bytes: unreserved kept, every other byte as uppercase `%XX`. */
export function uriEncodeBytes(bytes: Uint8Array): string {
  let out = '';
  for (const byte of bytes) {
    out += isUnreserved(byte) ? String.fromCharCode(byte) : `%${HEX[byte >> 4]}${HEX[byte & 15]}`;
  }
  return out;
}

/** AWS `UriEncode` of a string's UTF-8 bytes (so `/` becomes `%2F`). */
export function uriEncode(value: string): string {
  return uriEncodeBytes(Buffer.from(value, 'utf8'));
}

/**
 * Encodes an object key for a path-style URL the way AWS SDKs do: each `/`-separated segment
 * with `UriEncode`, the slashes kept. `a b/ü+.txt` → `a%20b/%C3%BC%2B.txt`.
 */
export function encodeKeyPath(key: string): string {
  return key.split('/').map(uriEncode).join('/');
}

function hexValue(code: number): number {
  if (code >= 0x30 && code <= 0x39) return code - 0x30;
  if (code >= 0x41 && code <= 0x46) return code - 0x37;
  if (code >= 0x61 && code <= 0x66) return code - 0x57;
  return -1;
}

/**
 * Decodes `%XX` escapes to bytes. `+` decodes to a space: S3 reads a raw `+` as a space in the
 * path as well as in the query (a literal plus travels as `%2B`), and clients such as s3cmd
 * rely on it. A `%` not followed by two hex digits is refused, as S3 does.
 */
export function percentDecode(raw: string): Buffer {
  const bytes: number[] = [];
  for (let i = 0; i < raw.length; i++) {
    const code = raw.charCodeAt(i);
    if (code === 0x25) {
      const hi = hexValue(raw.charCodeAt(i + 1));
      const lo = hexValue(raw.charCodeAt(i + 2));
      if (hi < 0 || lo < 0) throw new SigV4Error('InvalidURI');
      bytes.push((hi << 4) | lo);
      i += 2;
    } else if (code === 0x2b) {
      bytes.push(0x20);
    } else if (code < 0x100) {
      // Node hands a request line's non-ASCII bytes over as latin1 characters, one per byte.
      bytes.push(code);
    } else {
      // Wider characters can only come from a caller's own string: take their UTF-8 bytes.
      const point = raw.codePointAt(i) ?? code;
      bytes.push(...Buffer.from(String.fromCodePoint(point), 'utf8'));
      if (point > 0xffff) i++;
    }
  }
  return Buffer.from(bytes);
}

const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/** Decoded bytes as text, refusing invalid UTF-8 (S3 keys and parameters are UTF-8). */
function utf8(bytes: Buffer): string {
  try {
    return strictUtf8.decode(bytes);
  } catch {
    throw new SigV4Error('InvalidURI');
  }
}

/**
 * The canonical URI of a raw request path: each segment decoded and re-encoded with
 * `UriEncode`. Segments are handled one by one so that an escaped slash (`%2F`) stays
 * escaped, matching what a client that escaped it signed; S3 does not double-encode and does
 * not normalize `.`, `..` or empty segments.
 */
export function canonicalUri(rawPath: string): string {
  if (rawPath === '') return '/';
  return rawPath
    .split('/')
    .map((segment) => uriEncodeBytes(percentDecode(segment)))
    .join('/');
}

/**
 * The decoded request path, decoded with the same rules as {@link canonicalUri}, so routing
 * sees the key the signature covered: `/s3/b/a+b%2Bc.txt` → `/s3/b/a b+c.txt`.
 */
export function decodePath(rawPath: string): string {
  return utf8(percentDecode(rawPath));
}

/** One query parameter, decoded to bytes. */
interface RawPair {
  name: Buffer;
  value: Buffer;
}

function splitQuery(rawQuery: string): RawPair[] {
  const pairs: RawPair[] = [];
  for (const part of rawQuery.split('&')) {
    if (part === '') continue;
    const eq = part.indexOf('=');
    pairs.push({
      name: percentDecode(eq < 0 ? part : part.slice(0, eq)),
      value: percentDecode(eq < 0 ? '' : part.slice(eq + 1)),
    });
  }
  return pairs;
}

/**
 * Decodes a raw query string into `[name, value]` pairs in order (`+` as a space; a bare
 * `uploads` becomes `['uploads', '']`), with the same rules the signature check uses.
 */
export function parseQuery(rawQuery: string): Array<[string, string]> {
  return splitQuery(rawQuery).map((p) => [utf8(p.name), utf8(p.value)]);
}

/**
 * The canonical query string: every parameter re-encoded with `UriEncode`, sorted by encoded
 * name then encoded value, `name=value` joined by `&`. `exclude` names parameters to leave out
 * (a presigned request's own `X-Amz-Signature`).
 */
export function canonicalQuery(rawQuery: string, exclude: readonly string[] = []): string {
  return splitQuery(rawQuery)
    .filter((p) => !exclude.includes(p.name.toString('latin1')))
    .map((p) => [uriEncodeBytes(p.name), uriEncodeBytes(p.value)] as const)
    .sort(([an, av], [bn, bv]) => (an < bn ? -1 : an > bn ? 1 : av < bv ? -1 : av > bv ? 1 : 0))
    .map(([n, v]) => `${n}=${v}`)
    .join('&');
}
