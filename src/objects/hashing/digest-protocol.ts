/** The messages between digest-pool.ts (main thread) and digest-worker.ts. */
import type { DigestAlgorithm } from './running.js';

export type DigestRequest =
  /** Sent first: the batch slots, memory shared with the main thread. */
  | { op: 'slots'; memory: SharedArrayBuffer; slotBytes: number }
  | { op: 'open'; id: number; algorithms: DigestAlgorithm[] }
  /** The next `length` bytes of the body are in `slot`; answer `free` once read. */
  | { op: 'slot'; id: number; slot: number; length: number }
  /** The next bytes of the body, when every slot was in use (transferred). */
  | { op: 'bytes'; id: number; bytes: Uint8Array }
  /** The body is complete: answer the digests. */
  | { op: 'end'; id: number }
  /** The body was abandoned: forget it. */
  | { op: 'drop'; id: number };

export type DigestReply =
  | { op: 'done'; id: number; digests: [DigestAlgorithm, Uint8Array][] }
  | { op: 'failed'; id: number; error: string }
  /** The slot has been read and may be filled again. */
  | { op: 'free'; slot: number };
