/**
 * OpenSSH public keys as users paste them (one authorized_keys line). The blob is parsed and
 * checked for real rather than matched with a regex: a key we store must be one the SSH gateway
 * can later verify signatures with, and the fingerprint we show must equal `ssh-keygen -l`'s.
 */
import { createHash, createPublicKey, type JsonWebKey } from 'node:crypto';

export interface ParsedSshKey {
  /** The key type, e.g. `ssh-ed25519`. */
  type: string;
  /** Key size in bits, as `ssh-keygen -l` reports it. */
  bits: number;
  /** `SHA256:…`, identical to OpenSSH's default fingerprint. */
  fingerprint: string;
  comment?: string;
  /** `<type> <base64>[ <comment>]`, with surrounding and separating whitespace tidied. */
  normalized: string;
}

/** A key that cannot be accepted; the message is safe to show to the user as is. */
export class SshKeyError extends Error {
  override name = 'SshKeyError';
}

// Generous for a 16384-bit RSA key plus a long comment, small enough to stop abuse.
const MAX_LINE_LENGTH = 16 * 1024;
const MIN_RSA_BITS = 2048;
// OpenSSH refuses larger RSA moduli too (SSHBUF_MAX_BIGNUM), so such keys could never log in.
const MAX_RSA_BITS = 16384;

const ECDSA_CURVES: Record<
  string,
  { curve: string; jwkCurve: string; coordBytes: number; bits: number }
> = {
  'ecdsa-sha2-nistp256': { curve: 'nistp256', jwkCurve: 'P-256', coordBytes: 32, bits: 256 },
  'ecdsa-sha2-nistp384': { curve: 'nistp384', jwkCurve: 'P-384', coordBytes: 48, bits: 384 },
  'ecdsa-sha2-nistp521': { curve: 'nistp521', jwkCurve: 'P-521', coordBytes: 66, bits: 521 },
};

const SUPPORTED_TYPES = ['ssh-ed25519', ...Object.keys(ECDSA_CURVES), 'ssh-rsa'];
const SUPPORTED_LIST = 'ssh-ed25519, ecdsa-sha2-nistp256/384/521 or ssh-rsa';

/** Reads the SSH wire format (RFC 4251 §5): uint32 lengths, strings and mpints. */
class WireReader {
  private offset = 0;

  constructor(private readonly buf: Buffer) {}

  private take(length: number): Buffer {
    if (length > this.buf.length - this.offset) {
      throw new SshKeyError('The key data is truncated.');
    }
    const out = this.buf.subarray(this.offset, this.offset + length);
    this.offset += length;
    return out;
  }

  string(): Buffer {
    return this.take(this.take(4).readUInt32BE(0));
  }

  /** A non-negative mpint, returned as big-endian bytes without leading zeros. */
  mpint(what: string): Buffer {
    const raw = this.string();
    // mpints are two's complement: a set top bit without a 0x00 pad means a negative number.
    if (raw.length > 0 && (raw[0] as number) & 0x80) {
      throw new SshKeyError(`The key's ${what} is negative.`);
    }
    let start = 0;
    while (start < raw.length && raw[start] === 0) start++;
    return raw.subarray(start);
  }

  /** Every key format ends exactly at its last field; extra bytes mean a corrupt or forged blob. */
  end(): void {
    const left = this.buf.length - this.offset;
    if (left > 0) {
      throw new SshKeyError(
        `The key data has ${left} unexpected trailing byte${left === 1 ? '' : 's'}.`,
      );
    }
  }
}

/**
 * Parses and validates one OpenSSH public key line (`<type> <base64> [comment]`).
 * Throws SshKeyError with a user-facing message when the key is malformed, unsupported or weak.
 */
export function parseSshPublicKey(text: string): ParsedSshKey {
  const line = text.trim();
  if (line === '') throw new SshKeyError('The SSH public key is empty.');
  if (/[\r\n]/.test(line)) {
    throw new SshKeyError('Paste exactly one public key, on a single line.');
  }
  if (line.length > MAX_LINE_LENGTH) {
    throw new SshKeyError(`The SSH public key is longer than ${MAX_LINE_LENGTH} characters.`);
  }

  // The `s` flag lets the comment hold any character; odd ones are refused below.
  const match = /^(\S+)(?:\s+(\S+))?(?:\s+(.*))?$/s.exec(line);
  const type = match?.[1] ?? '';
  const base64 = match?.[2];
  const comment = match?.[3]?.trim() || undefined;

  checkType(type, line);
  if (base64 === undefined) {
    throw new SshKeyError('The key data is missing after the key type.');
  }
  if (comment !== undefined && /[\p{Cc}\p{Zl}\p{Zp}]/u.test(comment)) {
    throw new SshKeyError('The key comment contains control characters.');
  }

  const blob = decodeBase64(base64);
  const reader = new WireReader(blob);
  const innerType = reader.string().toString('latin1');
  if (innerType !== type) {
    throw new SshKeyError(
      `The key type ${type} does not match the type ${printable(innerType)} inside the key data.`,
    );
  }

  const bits = readKey(type, reader);
  reader.end();

  const fingerprint =
    'SHA256:' + createHash('sha256').update(blob).digest('base64').replace(/=+$/, '');
  const normalized = `${type} ${base64}` + (comment === undefined ? '' : ` ${comment}`);
  return comment === undefined
    ? { type, bits, fingerprint, normalized }
    : { type, bits, fingerprint, comment, normalized };
}

/** Refuses anything but the supported types, with a hint that fits the common mistakes. */
function checkType(type: string, line: string): void {
  if (SUPPORTED_TYPES.includes(type)) return;
  // authorized_keys options (`command="…"`, `no-pty,…`) come before the type; we store bare keys.
  const keyTypeLater = /(?:^|\s)(?:ssh-|ecdsa-|sk-)\S+\s+AAAA/.test(line.slice(type.length));
  if (keyTypeLater || /[=",]/.test(type)) {
    throw new SshKeyError('Options before the key type are not supported; paste the bare key.');
  }
  if (type.endsWith('-cert-v01@openssh.com')) {
    throw new SshKeyError('SSH certificates are not supported; paste the plain public key.');
  }
  if (type === 'ssh-dss') {
    throw new SshKeyError(
      `DSA keys (ssh-dss) are insecure and not supported; use ${SUPPORTED_LIST}.`,
    );
  }
  if (type.startsWith('sk-')) {
    throw new SshKeyError(`Security-key (sk-) keys are not supported yet; use ${SUPPORTED_LIST}.`);
  }
  throw new SshKeyError(`Unsupported key type "${printable(type)}"; use ${SUPPORTED_LIST}.`);
}

/** Strict base64: Buffer.from silently skips bad characters, so round-trip to be sure. */
function decodeBase64(base64: string): Buffer {
  const blob = Buffer.from(base64, 'base64');
  if (
    base64.length % 4 !== 0 ||
    !/^[A-Za-z0-9+/]+={0,2}$/.test(base64) ||
    blob.toString('base64') !== base64
  ) {
    throw new SshKeyError('The key data is not valid base64.');
  }
  return blob;
}

/** Reads and checks the fields after the type; returns the key size in bits. */
function readKey(type: string, reader: WireReader): number {
  if (type === 'ssh-ed25519') return readEd25519(reader);
  if (type === 'ssh-rsa') return readRsa(reader);
  return readEcdsa(type, reader);
}

function readEd25519(reader: WireReader): number {
  if (reader.string().length !== 32) {
    throw new SshKeyError('The ed25519 key must be exactly 32 bytes long.');
  }
  return 256;
}

function readEcdsa(type: string, reader: WireReader): number {
  const spec = ECDSA_CURVES[type] as (typeof ECDSA_CURVES)[string];
  const curve = reader.string().toString('latin1');
  if (curve !== spec.curve) {
    throw new SshKeyError(
      `The ${type} key names curve ${printable(curve)} instead of ${spec.curve}.`,
    );
  }
  const point = reader.string();
  // OpenSSH only emits uncompressed points: 0x04 || x || y.
  if (point.length !== 1 + 2 * spec.coordBytes || point[0] !== 0x04) {
    throw new SshKeyError(`The ${type} key does not hold an uncompressed ${spec.curve} point.`);
  }
  const x = point.subarray(1, 1 + spec.coordBytes);
  const y = point.subarray(1 + spec.coordBytes);
  // OpenSSL refuses points that are off the curve, which would allow invalid-curve attacks.
  assertValidKey(
    { kty: 'EC', crv: spec.jwkCurve, x: x.toString('base64url'), y: y.toString('base64url') },
    `The ${type} key's point is not on the ${spec.curve} curve.`,
  );
  return spec.bits;
}

function readRsa(reader: WireReader): number {
  const e = reader.mpint('RSA exponent');
  const n = reader.mpint('RSA modulus');
  const bits = bitLength(n);
  if (bits < MIN_RSA_BITS) {
    throw new SshKeyError(
      `RSA keys must have at least ${MIN_RSA_BITS} bits (this one has ${bits}).`,
    );
  }
  if (bits > MAX_RSA_BITS) {
    throw new SshKeyError(`RSA keys may have at most ${MAX_RSA_BITS} bits (this one has ${bits}).`);
  }
  // OpenSSL's JWK import accepts nonsense like e = 0; a real RSA key has an odd modulus
  // (a product of two odd primes) and an odd exponent greater than 1 that is smaller than n.
  const odd = (value: Buffer): boolean => ((value[value.length - 1] as number) & 1) === 1;
  if (!odd(n)) throw new SshKeyError('The RSA modulus is not a valid RSA modulus.');
  if (!odd(e) || (e.length === 1 && e[0] === 1) || e.length > n.length) {
    throw new SshKeyError('The RSA public exponent is not valid.');
  }
  assertValidKey(
    { kty: 'RSA', n: n.toString('base64url'), e: e.toString('base64url') },
    'The RSA key is not a valid public key.',
  );
  return bits;
}

function assertValidKey(jwk: JsonWebKey, message: string): void {
  try {
    createPublicKey({ key: jwk, format: 'jwk' });
  } catch {
    throw new SshKeyError(message);
  }
}

/** Bit length of a big-endian unsigned integer without leading zero bytes. */
function bitLength(value: Buffer): number {
  if (value.length === 0) return 0;
  return (value.length - 1) * 8 + (value[0] as number).toString(2).length;
}

/** Names from untrusted blobs go into messages, so keep them short and printable. */
function printable(value: string): string {
  const clean = value.replace(/[^\x20-\x7e]/g, '?');
  return clean.length > 40 ? `${clean.slice(0, 40)}…` : clean;
}
