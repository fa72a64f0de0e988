/** The messages between digest-pool.ts (main thread) and digest-worker.ts. */
import type { DigestAlgorithm } from './running.js';

export type DigestRequest =
  | { op: 'open'; id: number; algorithms: DigestAlgorithm[] }
  /** The next pieces of the body, in order (copies: the sender keeps its own). */
  | { op: 'data'; id: number; chunks: Uint8Array[] }
  /** The body is complete: answer the digests. */
  | { op: 'end'; id: number }
  /** The body was abandoned: forget it. */
  | { op: 'drop'; id: number };

export type DigestReply =
  | { op: 'done'; id: number; digests: [DigestAlgorithm, Uint8Array][] }
  | { op: 'failed'; id: number; error: string };
