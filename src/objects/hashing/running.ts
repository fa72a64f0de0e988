/**
 * One running digest per algorithm, the same code on the main thread and on the digest
 * workers: MD5 (S3's ETag) and S3's additional checksums.
 */
import { createHash } from 'node:crypto';
import { runningChecksum, type ChecksumAlgorithm } from '../sigv4/checksum.js';

/** Everything a body can be hashed with. */
export type DigestAlgorithm = 'md5' | ChecksumAlgorithm;

/** A digest fed in pieces. */
export interface RunningDigest {
  update(data: Uint8Array): void;
  /** The digest's bytes; ends its input. */
  digest(): Buffer;
}

export function runningDigest(algorithm: DigestAlgorithm): RunningDigest {
  if (algorithm !== 'md5') return runningChecksum(algorithm);
  const hash = createHash('md5');
  return { update: (data) => void hash.update(data), digest: () => hash.digest() };
}

/** The digests of several algorithms over the same bytes. */
export type Digests = Map<DigestAlgorithm, Buffer>;

/** Runs every algorithm over the same pieces. */
export class DigestSet {
  private readonly running: Map<DigestAlgorithm, RunningDigest>;

  constructor(algorithms: Iterable<DigestAlgorithm>) {
    this.running = new Map([...algorithms].map((a) => [a, runningDigest(a)]));
  }

  update(data: Uint8Array): void {
    for (const digest of this.running.values()) digest.update(data);
  }

  digests(): Digests {
    return new Map([...this.running].map(([a, d]) => [a, d.digest()]));
  }
}
