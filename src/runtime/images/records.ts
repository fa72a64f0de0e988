/**
 * The record of a pulled image, `<dir>/images/<manifest hex>.json`: what a restarted
 * process needs to hand the image out without the network, and which blobs it holds (so
 * removing an image can free the blobs no other image uses). Written through a temp file
 * and a rename, after the root is in place: a record always describes a complete image.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, open, readFile, readdir, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import type { ImageConfig } from './image-config.js';

/** What is stored about one pulled image. */
export interface ImageRecord {
  version: 1;
  /** The platform manifest's digest (what the root is unpacked from). */
  digest: string;
  /** The reference of the latest pull, canonical. */
  ref: string;
  config: ImageConfig;
  sizeBytes: number;
  /** Manifests that lead here: the index (when there is one) and the manifest itself. */
  manifests: string[];
  /** The config and layer blobs. */
  blobs: string[];
  pulledAt: string;
}

const recordSchema = z.object({
  version: z.literal(1),
  digest: z.string().regex(/^sha256:[a-f0-9]{64}$/),
  ref: z.string(),
  config: z.object({
    entrypoint: z.array(z.string()).optional(),
    cmd: z.array(z.string()).optional(),
    env: z.array(z.string()),
    workingDir: z.string().optional(),
    user: z.string().optional(),
    stopSignal: z.string().optional(),
    exposedPorts: z.array(z.number()).optional(),
  }),
  sizeBytes: z.number(),
  manifests: z.array(z.string()),
  blobs: z.array(z.string()),
  pulledAt: z.string(),
});

/** The image records of a store directory. */
export class ImageRecords {
  private readonly dir: string;

  constructor(storeDir: string) {
    this.dir = path.join(storeDir, 'images');
  }

  async init(): Promise<void> {
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    // Half-written records of a crash: the images they describe will simply be pulled again.
    for (const name of await readdir(this.dir)) {
      if (name.endsWith('.tmp')) await rm(path.join(this.dir, name), { force: true });
    }
  }

  private file(digest: string): string {
    return path.join(this.dir, `${digest.slice('sha256:'.length)}.json`);
  }

  /** The record of `digest`, or undefined (also for a record we cannot read). */
  async get(digest: string): Promise<ImageRecord | undefined> {
    if (!/^sha256:[a-f0-9]{64}$/.test(digest)) return undefined;
    const text = await readFile(this.file(digest), 'utf8').catch(() => undefined);
    if (text === undefined) return undefined;
    try {
      const r = recordSchema.safeParse(JSON.parse(text));
      return r.success ? (r.data as ImageRecord) : undefined;
    } catch {
      return undefined;
    }
  }

  /** Writes a record durably (fsync, rename). */
  async put(record: ImageRecord): Promise<void> {
    const final = this.file(record.digest);
    const tmp = `${final}.${randomBytes(6).toString('hex')}.tmp`;
    const fh = await open(tmp, 'wx', 0o600);
    try {
      await fh.writeFile(`${JSON.stringify(record, null, 2)}\n`);
      await fh.sync();
    } finally {
      await fh.close();
    }
    await rename(tmp, final);
  }

  async remove(digest: string): Promise<void> {
    await rm(this.file(digest), { force: true });
  }

  /** Every record. */
  async all(): Promise<ImageRecord[]> {
    const names = await readdir(this.dir).catch(() => [] as string[]);
    const out: ImageRecord[] = [];
    for (const n of names) {
      const m = /^([a-f0-9]{64})\.json$/.exec(n);
      const r = m ? await this.get(`sha256:${m[1]}`) : undefined;
      if (r) out.push(r);
    }
    return out;
  }
}
