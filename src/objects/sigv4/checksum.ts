/**
 * S3's additional checksums (`x-amz-checksum-crc32`, `-crc32c`, `-crc64nvme`, `-sha1`,
 * `-sha256`), sent as headers or as aws-chunked trailers: base64 of the big-endian digest.
 * Computed incrementally so bodies are checked while they stream.
 */
import { createHash, type Hash } from 'node:crypto';
import zlib from 'node:zlib';
import { SigV4Error } from './errors.js';
import { headerValue } from './canonical.js';
import type { HeaderBag } from './types.js';

/** A checksum algorithm S3 accepts. */
export type ChecksumAlgorithm = 'crc32' | 'crc32c' | 'crc64nvme' | 'sha1' | 'sha256';

/** Every supported algorithm. */
export const CHECKSUM_ALGORITHMS: readonly ChecksumAlgorithm[] = [
  'crc32',
  'crc32c',
  'crc64nvme',
  'sha1',
  'sha256',
];

/** Digest sizes in bytes, to refuse malformed values before comparing. */
const DIGEST_BYTES: Record<ChecksumAlgorithm, number> = {
  crc32: 4,
  crc32c: 4,
  crc64nvme: 8,
  sha1: 20,
  sha256: 32,
};

const FIELD_PREFIX = 'x-amz-checksum-';

/** `crc32` → `x-amz-checksum-crc32`. */
export function checksumField(algorithm: ChecksumAlgorithm): string {
  return `${FIELD_PREFIX}${algorithm}`;
}

/** `x-amz-checksum-crc32` → `crc32`; undefined for other names (e.g. `x-amz-checksum-type`). */
export function checksumAlgorithmOf(field: string): ChecksumAlgorithm | undefined {
  const name = field.toLowerCase();
  if (!name.startsWith(FIELD_PREFIX)) return undefined;
  const algorithm = name.slice(FIELD_PREFIX.length);
  return (CHECKSUM_ALGORITHMS as readonly string[]).includes(algorithm)
    ? (algorithm as ChecksumAlgorithm)
    : undefined;
}

/** A reflected CRC-32 table for `poly`. */
function crc32Table(poly: number): Uint32Array {
  const table = new Uint32Array(256);
  for (let i = 0; i < 256; i++) {
    let c = i;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ poly : c >>> 1;
    table[i] = c >>> 0;
  }
  return table;
}

function crc32With(table: Uint32Array, data: Uint8Array, previous: number): number {
  let crc = ~previous >>> 0;
  for (const byte of data) crc = table[(crc ^ byte) & 0xff]! ^ (crc >>> 8);
  return ~crc >>> 0;
}

let crc32IeeeTable: Uint32Array | undefined;
const crc32cTable = crc32Table(0x82f63b78);

// zlib.crc32 (Node >= 20.15) runs natively and is much faster than a table in JS.
const nativeCrc32: ((data: Uint8Array, value?: number) => number) | undefined =
  typeof zlib.crc32 === 'function' ? zlib.crc32 : undefined;

/** CRC-32 (IEEE, as zlib), continuing from `previous` (0 to start). */
export function crc32(data: Uint8Array, previous = 0): number {
  if (nativeCrc32) return nativeCrc32(data, previous) >>> 0;
  crc32IeeeTable ??= crc32Table(0xedb88320);
  return crc32With(crc32IeeeTable, data, previous);
}

/** CRC-32C (Castagnoli), continuing from `previous` (0 to start). */
export function crc32c(data: Uint8Array, previous = 0): number {
  return crc32With(crc32cTable, data, previous);
}

// CRC-64/NVME, reflected polynomial 0x9a6c9329ac4bc9b5. JavaScript has no fast 64-bit
// integers, so the state is kept as two 32-bit halves.
const CRC64_POLY_HI = 0x9a6c9329;
const CRC64_POLY_LO = 0xac4bc9b5;
const crc64Hi = new Uint32Array(256);
const crc64Lo = new Uint32Array(256);
for (let i = 0; i < 256; i++) {
  let hi = 0;
  let lo = i;
  for (let k = 0; k < 8; k++) {
    const carry = lo & 1;
    lo = ((lo >>> 1) | ((hi & 1) << 31)) >>> 0;
    hi = hi >>> 1;
    if (carry) {
      lo = (lo ^ CRC64_POLY_LO) >>> 0;
      hi = (hi ^ CRC64_POLY_HI) >>> 0;
    }
  }
  crc64Hi[i] = hi;
  crc64Lo[i] = lo;
}

/** CRC-64/NVME state as `[hi, lo]` 32-bit halves; start from `[0, 0]`. */
export function crc64nvme(data: Uint8Array, previous: [number, number] = [0, 0]): [number, number] {
  let hi = ~previous[0] >>> 0;
  let lo = ~previous[1] >>> 0;
  for (const byte of data) {
    const index = (lo ^ byte) & 0xff;
    lo = (((lo >>> 8) | (hi << 24)) ^ crc64Lo[index]!) >>> 0;
    hi = ((hi >>> 8) ^ crc64Hi[index]!) >>> 0;
  }
  return [~hi >>> 0, ~lo >>> 0];
}

/** One running digest. */
interface Running {
  update(data: Uint8Array): void;
  digest(): Buffer;
}

/** A running digest of `algorithm`, fed in pieces; `digest()` ends its input. */
export function runningChecksum(algorithm: ChecksumAlgorithm): Running {
  switch (algorithm) {
    case 'crc32':
    case 'crc32c': {
      const fn = algorithm === 'crc32' ? crc32 : crc32c;
      let crc = 0;
      return {
        update: (data) => void (crc = fn(data, crc)),
        digest: () => {
          const out = Buffer.alloc(4);
          out.writeUInt32BE(crc);
          return out;
        },
      };
    }
    case 'crc64nvme': {
      let state: [number, number] = [0, 0];
      return {
        update: (data) => void (state = crc64nvme(data, state)),
        digest: () => {
          const out = Buffer.alloc(8);
          out.writeUInt32BE(state[0], 0);
          out.writeUInt32BE(state[1], 4);
          return out;
        },
      };
    }
    case 'sha1':
    case 'sha256': {
      const hash: Hash = createHash(algorithm);
      return { update: (data) => void hash.update(data), digest: () => hash.digest() };
    }
  }
}

/** Computes several checksums over data fed in pieces. */
export class Checksummer {
  private readonly digests = new Map<ChecksumAlgorithm, Running>();
  private readonly results = new Map<ChecksumAlgorithm, string>();

  constructor(algorithms: Iterable<ChecksumAlgorithm>) {
    for (const algorithm of algorithms) this.digests.set(algorithm, runningChecksum(algorithm));
  }

  /** The algorithms being computed. */
  get algorithms(): ChecksumAlgorithm[] {
    return [...this.digests.keys()];
  }

  /** Feeds the next piece of data. */
  update(data: Uint8Array): void {
    for (const digest of this.digests.values()) digest.update(data);
  }

  /** The base64 checksum of everything fed so far; ends that algorithm's input. */
  digest(algorithm: ChecksumAlgorithm): string {
    const done = this.results.get(algorithm);
    if (done !== undefined) return done;
    const digest = this.digests.get(algorithm);
    if (!digest) throw new Error(`checksum ${algorithm} was not being computed`);
    const value = digest.digest().toString('base64');
    this.results.set(algorithm, value);
    return value;
  }
}

/** The base64 checksum of `data` with `algorithm`. */
export function computeChecksum(algorithm: ChecksumAlgorithm, data: Uint8Array): string {
  const summer = new Checksummer([algorithm]);
  summer.update(data);
  return summer.digest(algorithm);
}

/**
 * The checksums a request (headers) or an aws-chunked trailer claims, by algorithm. S3 takes
 * one at most; a value that is not base64 of the algorithm's digest size is refused.
 */
export function claimedChecksums(fields: HeaderBag): Map<ChecksumAlgorithm, string> {
  const claimed = new Map<ChecksumAlgorithm, string>();
  for (const name of Object.keys(fields)) {
    const algorithm = checksumAlgorithmOf(name);
    const value = headerValue(fields, name)?.trim();
    if (!algorithm || value === undefined) continue;
    const bytes = DIGEST_BYTES[algorithm];
    const valid =
      /^[A-Za-z0-9+/]+={0,2}$/.test(value) &&
      value.length === Math.ceil(bytes / 3) * 4 &&
      Buffer.from(value, 'base64').length === bytes;
    if (!valid) {
      throw new SigV4Error(
        'InvalidRequest',
        `Value for ${checksumField(algorithm)} header is invalid.`,
      );
    }
    claimed.set(algorithm, value);
  }
  if (claimed.size > 1) {
    throw new SigV4Error('InvalidRequest', 'Expecting a single x-amz-checksum- header');
  }
  return claimed;
}

/**
 * Checks the `x-amz-checksum-*` values in `fields` (request headers or trailers) against the
 * data: the bytes themselves, or a {@link Checksummer} that was fed them.
 *
 * @throws {SigV4Error} `BadDigest` on a mismatch, `InvalidRequest` on a malformed value.
 */
export function verifyChecksums(
  fields: HeaderBag,
  data: Uint8Array | Pick<Checksummer, 'digest'>,
): void {
  for (const [algorithm, expected] of claimedChecksums(fields)) {
    const actual =
      data instanceof Uint8Array ? computeChecksum(algorithm, data) : data.digest(algorithm);
    if (actual !== expected) {
      throw new SigV4Error(
        'BadDigest',
        `The ${algorithm.toUpperCase()} you specified did not match the calculated checksum.`,
      );
    }
  }
}
