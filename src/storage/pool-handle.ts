/**
 * The host's storage pool, opened on first use: a control plane that only serves the API
 * (or a test) never formats an image or mounts a loop device, and the first database or
 * volume opens it once for everyone.
 */
import path from 'node:path';
import type { Logger } from 'pino';
import { openStoragePool, type OpenedStoragePool } from './pool/open-pool.js';

export class PoolHandle {
  private opening: Promise<OpenedStoragePool> | undefined;

  constructor(
    private readonly dataDir: string,
    private readonly log: Logger,
    private readonly prefer?: 'btrfs' | 'directory',
    /** Size of a new btrfs image; an existing pool keeps its size. */
    private readonly imageSizeBytes?: number,
  ) {}

  /** The pool, opening it now if this is the first call. */
  get(): Promise<OpenedStoragePool> {
    this.opening ??= openStoragePool({
      dir: path.join(this.dataDir, 'pool'),
      prefer: this.prefer,
      imageSizeBytes: this.imageSizeBytes,
      log: this.log,
    }).catch((err: unknown) => {
      this.opening = undefined; // let a later call try again
      throw err;
    });
    return this.opening;
  }

  /** Whether the pool was opened (for reports that must not open it just to look). */
  get opened(): boolean {
    return this.opening !== undefined;
  }

  async close(): Promise<void> {
    if (!this.opening) return;
    const { pool } = await this.opening.catch(() => ({ pool: undefined }));
    await pool?.close().catch((err: unknown) => {
      // Databases and machines outlive pier by design: their pool stays mounted for them,
      // and the next start finds it mounted.
      if (!/busy/i.test(String((err as Error).message))) throw err;
      this.log.info('the storage pool stays mounted: servers started by pier still use it');
    });
  }
}
