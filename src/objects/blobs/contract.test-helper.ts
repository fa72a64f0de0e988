/**
 * The behaviour every blob store must have, as one suite that each implementation's test
 * file runs against its own store: the filesystem store always, the S3 store when an S3
 * service is reachable. What differs between stores (how to count leftovers of failed
 * writes, how much memory a large write may take) comes in through the harness.
 */
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BlobError, type BlobStore, type BlobWriteResult } from './blob-store.js';

const MiB = 1024 * 1024;

/** What a store's test file hands the contract. */
export interface BlobStoreHarness {
  store: BlobStore;
  /** How many remains of writes in progress exist now (temp files, temp keys, uploads). */
  leftovers(): Promise<number>;
  /** How much the process's RSS may grow while a 64 MiB body is written. */
  rssBudget: number;
  cleanup?(): Promise<void>;
}

export function md5(data: Buffer): Buffer {
  return createHash('md5').update(data).digest();
}

export function sha256(data: Buffer): Buffer {
  return createHash('sha256').update(data).digest();
}

/** A byte stream of `chunks`, like a request body. */
export function bodyOf(...chunks: Buffer[]): Readable {
  return Readable.from(chunks, { objectMode: false });
}

export async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** A body that sends 1 MiB and then fails, like a client whose connection dropped. */
export function failingBody(how: 'error' | 'close' = 'error'): Readable {
  let sent = false;
  return new Readable({
    read() {
      if (!sent) {
        sent = true;
        this.push(randomBytes(MiB));
      } else if (how === 'error') {
        this.destroy(new Error('connection reset by peer'));
      } else {
        this.destroy();
      }
    },
  });
}

/** A fresh namespace or id, so that tests never see each other's blobs. */
export function newName(prefix = 'b'): string {
  return `${prefix}${randomUUID().replaceAll('-', '')}`;
}

async function codeOf(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (err) {
    if (err instanceof BlobError) return err.code;
    throw err;
  }
  return 'resolved';
}

async function collect(iterable: AsyncIterable<string>): Promise<string[]> {
  const out: string[] = [];
  for await (const item of iterable) out.push(item);
  return out.sort();
}

/** Options of the contract run that must be known before the store exists. */
export interface ContractOptions {
  /** Time allowed for each test that moves tens of MiB; default 60 s. */
  bigTimeout?: number;
}

/** Runs the blob store contract against the store `makeStore` builds. */
export function blobStoreContract(
  name: string,
  makeStore: () => Promise<BlobStoreHarness>,
  opts: ContractOptions = {},
): void {
  const big = opts.bigTimeout ?? 60_000;
  describe(`${name} (blob store contract)`, () => {
    let h: BlobStoreHarness;
    let store: BlobStore;
    let ns: string;

    beforeAll(async () => {
      h = await makeStore();
      store = h.store;
      ns = newName('ns');
    });

    afterAll(async () => {
      await h?.cleanup?.();
    });

    async function putBuffer(id: string, data: Buffer): Promise<BlobWriteResult> {
      return store.put(ns, id, bodyOf(data));
    }

    it('round-trips bytes, with the md5 of what was written', async () => {
      const data = randomBytes(3 * MiB + 17);
      const id = newName();
      const result = await store.put(ns, id, bodyOf(data.subarray(0, 1000), data.subarray(1000)));
      expect(result.size).toBe(data.length);
      expect(result.md5.equals(md5(data))).toBe(true);
      expect(result.sha256).toBeUndefined();
      expect((await readAll(await store.get(ns, id))).equals(data)).toBe(true);
      expect(await store.stat(ns, id)).toEqual({ size: data.length });
    });

    it('computes the sha256 when asked, and hands verify the digests', async () => {
      const data = randomBytes(100_000);
      let seen: BlobWriteResult | undefined;
      const result = await store.put(ns, newName(), bodyOf(data), {
        sha256: true,
        verify: (r) => (seen = r),
      });
      expect(result.sha256?.equals(sha256(data))).toBe(true);
      expect(result.md5.equals(md5(data))).toBe(true);
      expect(seen).toEqual(result);
    });

    it('serves byte ranges, inclusive at both ends', async () => {
      const data = randomBytes(2 * MiB + 3);
      const id = newName();
      await putBuffer(id, data);
      const range = async (start: number, end: number): Promise<Buffer> =>
        readAll(await store.get(ns, id, { start, end }));
      const n = data.length;
      expect((await range(0, 0)).equals(data.subarray(0, 1))).toBe(true);
      expect((await range(n - 1, n - 1)).equals(data.subarray(n - 1))).toBe(true);
      expect((await range(1000, MiB + 5)).equals(data.subarray(1000, MiB + 6))).toBe(true);
      expect((await range(0, n - 1)).equals(data)).toBe(true);
      // Past the end: the end is cut to the last byte, and a start there gives nothing.
      expect((await range(n - 10, n + 100)).equals(data.subarray(n - 10))).toBe(true);
      expect(await range(n, n + 5)).toHaveLength(0);
      await expect(store.get(ns, id, { start: 5, end: 4 })).rejects.toThrow(RangeError);
    });

    it('stores a zero-byte blob', async () => {
      const id = newName();
      const result = await store.put(ns, id, Readable.from([], { objectMode: false }));
      expect(result.size).toBe(0);
      expect(result.md5.toString('hex')).toBe('d41d8cd98f00b204e9800998ecf8427e');
      expect(await store.stat(ns, id)).toEqual({ size: 0 });
      expect(await readAll(await store.get(ns, id))).toHaveLength(0);
      expect(await readAll(await store.get(ns, id, { start: 0, end: 0 }))).toHaveLength(0);
    });

    it('answers not-found for a missing blob, and stat undefined', async () => {
      expect(await codeOf(store.get(ns, newName()))).toBe('not-found');
      expect(await codeOf(store.get(newName('ns'), newName()))).toBe('not-found');
      expect(await store.stat(ns, newName())).toBeUndefined();
    });

    it(
      'streams 64 MiB from a generator with bounded memory',
      async () => {
        const total = 64 * MiB;
        const base = randomBytes(MiB);
        const hash = createHash('md5');
        async function* generate(): AsyncGenerator<Buffer> {
          for (let i = 0; i < total / MiB; i++) {
            const chunk = Buffer.from(base); // a fresh buffer each time, as a socket gives
            chunk.writeUInt32BE(i, 0);
            hash.update(chunk);
            yield chunk;
          }
        }
        const id = newName();
        const before = process.memoryUsage().rss;
        let peak = before;
        const sampler = setInterval(() => {
          peak = Math.max(peak, process.memoryUsage().rss);
        }, 5);
        let result: BlobWriteResult;
        try {
          result = await store.put(ns, id, Readable.from(generate(), { objectMode: false }));
        } finally {
          clearInterval(sampler);
        }
        peak = Math.max(peak, process.memoryUsage().rss);
        expect(result.size).toBe(total);
        expect(result.md5.equals(hash.digest())).toBe(true);
        expect(peak - before).toBeLessThan(h.rssBudget);
        // Read back in a streaming way too: hash it rather than hold it.
        const back = createHash('md5');
        let size = 0;
        for await (const chunk of await store.get(ns, id)) {
          back.update(chunk as Buffer);
          size += (chunk as Buffer).length;
        }
        expect(size).toBe(total);
        expect(back.digest().equals(result.md5)).toBe(true);
        await store.delete(ns, id);
      },
      big,
    );

    it('leaves nothing when verify throws, and rethrows its error', async () => {
      const id = newName();
      const mine = new Error('digest mismatch');
      await expect(
        store.put(ns, id, bodyOf(randomBytes(2 * MiB)), {
          verify: () => {
            throw mine;
          },
        }),
      ).rejects.toBe(mine);
      expect(await store.stat(ns, id)).toBeUndefined();
      expect(await h.leftovers()).toBe(0);
    });

    it('leaves nothing when the body fails midway (aborted)', async () => {
      for (const how of ['error', 'close'] as const) {
        const id = newName();
        expect(await codeOf(store.put(ns, id, failingBody(how)))).toBe('aborted');
        expect(await store.stat(ns, id)).toBeUndefined();
      }
      expect(await h.leftovers()).toBe(0);
    });

    it('refuses a body past maxBytes (too-large) and leaves nothing', async () => {
      const id = newName();
      const body = bodyOf(randomBytes(MiB), randomBytes(MiB));
      expect(await codeOf(store.put(ns, id, body, { maxBytes: MiB + 10 }))).toBe('too-large');
      expect(body.destroyed).toBe(true);
      expect(await store.stat(ns, id)).toBeUndefined();
      expect(await h.leftovers()).toBe(0);
      // Exactly at the limit is fine.
      const exact = await store.put(ns, id, bodyOf(randomBytes(1000)), { maxBytes: 1000 });
      expect(exact.size).toBe(1000);
    });

    it('rejects invalid namespaces and ids everywhere (invalid-id)', async () => {
      const bad = ['../x', 'a/b', '..', 'AB', '', 'ab', '-abc', 'abc.d', 'a'.repeat(82), 'ab\0c'];
      const good = newName();
      for (const name of bad) {
        const body = bodyOf(Buffer.from('x'));
        expect(await codeOf(store.put(ns, name, body))).toBe('invalid-id');
        expect(body.destroyed).toBe(true); // the store owns the body, even when refusing it
        expect(await codeOf(store.put(name, good, bodyOf(Buffer.from('x'))))).toBe('invalid-id');
        expect(await codeOf(store.get(ns, name))).toBe('invalid-id');
        expect(await codeOf(store.get(name, good))).toBe('invalid-id');
        expect(await codeOf(store.stat(ns, name))).toBe('invalid-id');
        expect(await codeOf(store.delete(ns, name))).toBe('invalid-id');
        expect(await codeOf(store.concat(ns, good, [name]))).toBe('invalid-id');
        expect(await codeOf(store.concat(ns, name, []))).toBe('invalid-id');
        expect(await codeOf(store.deleteNamespace(name))).toBe('invalid-id');
        expect(await codeOf(collect(store.listOlderThan(name, new Date())))).toBe('invalid-id');
      }
      expect(await store.stat(ns, good)).toBeUndefined();
    });

    it('replaces a blob atomically: the old bytes until the new ones are complete', async () => {
      const id = newName();
      const first = randomBytes(MiB);
      const second = randomBytes(2 * MiB);
      await putBuffer(id, first);
      // Feed the second write by hand, and look while it is half done.
      const body = new Readable({ read() {} });
      const writing = store.put(ns, id, body);
      body.push(second.subarray(0, MiB));
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect((await readAll(await store.get(ns, id))).equals(first)).toBe(true);
      body.push(second.subarray(MiB));
      body.push(null);
      const result = await writing;
      expect(result.md5.equals(md5(second))).toBe(true);
      expect((await readAll(await store.get(ns, id))).equals(second)).toBe(true);
      expect(await store.stat(ns, id)).toEqual({ size: second.length });
    });

    it(
      'concatenates parts in order (5 MiB, 5 MiB, 1 byte), and the parts stay',
      async () => {
        const parts = [randomBytes(5 * MiB), randomBytes(5 * MiB), randomBytes(1)];
        const ids = parts.map(() => newName());
        for (const [i, part] of parts.entries()) await putBuffer(ids[i]!, part);
        const whole = Buffer.concat(parts);
        const id = newName();
        const result = await store.concat(ns, id, ids);
        expect(result.size).toBe(whole.length);
        expect(result.md5.equals(md5(whole))).toBe(true);
        expect((await readAll(await store.get(ns, id))).equals(whole)).toBe(true);
        for (const [i, part] of parts.entries()) {
          expect(await store.stat(ns, ids[i]!)).toEqual({ size: part.length });
        }
      },
      big,
    );

    it('refuses to concatenate a missing part (not-found) and writes nothing', async () => {
      const present = newName();
      await putBuffer(present, randomBytes(1000));
      const id = newName();
      expect(await codeOf(store.concat(ns, id, [present, newName()]))).toBe('not-found');
      expect(await store.stat(ns, id)).toBeUndefined();
      expect(await h.leftovers()).toBe(0);
    });

    it('deletes idempotently', async () => {
      const id = newName();
      await store.delete(ns, id);
      await putBuffer(id, randomBytes(10));
      await store.delete(ns, id);
      expect(await store.stat(ns, id)).toBeUndefined();
      expect(await codeOf(store.get(ns, id))).toBe('not-found');
      await store.delete(ns, id);
    });

    it('deletes a namespace and only it, idempotently', async () => {
      const doomed = newName('ns');
      const other = newName('ns');
      const ids = [newName(), newName(), newName()];
      for (const id of ids) await store.put(doomed, id, bodyOf(randomBytes(100)));
      await store.put(other, ids[0]!, bodyOf(randomBytes(100)));
      await store.deleteNamespace(doomed);
      for (const id of ids) expect(await store.stat(doomed, id)).toBeUndefined();
      expect(await collect(store.listOlderThan(doomed, new Date(Date.now() + 3_600_000)))).toEqual(
        [],
      );
      expect(await store.stat(other, ids[0]!)).toEqual({ size: 100 });
      await store.deleteNamespace(doomed);
      await store.deleteNamespace(newName('ns'));
      // The namespace can be used again afterwards.
      await store.put(doomed, ids[0]!, bodyOf(randomBytes(5)));
      expect(await store.stat(doomed, ids[0]!)).toEqual({ size: 5 });
      await store.deleteNamespace(doomed);
      await store.deleteNamespace(other);
    });

    it('lists the ids older than a time', async () => {
      const space = newName('ns');
      const ids = [newName(), newName()].sort();
      for (const id of ids) await store.put(space, id, bodyOf(randomBytes(10)));
      // Clocks of a remote service may be off a little: stay well clear of "now".
      expect(await collect(store.listOlderThan(space, new Date(Date.now() + 3_600_000)))).toEqual(
        ids,
      );
      expect(await collect(store.listOlderThan(space, new Date(Date.now() - 3_600_000)))).toEqual(
        [],
      );
      expect(await collect(store.listOlderThan(newName('ns'), new Date()))).toEqual([]);
      await store.deleteNamespace(space);
    });

    it(
      'writes different ids concurrently',
      async () => {
        const datas = Array.from({ length: 8 }, (_, i) => randomBytes(MiB + i * 100_000));
        const ids = datas.map(() => newName());
        const results = await Promise.all(
          datas.map((data, i) =>
            store.put(ns, ids[i]!, bodyOf(data.subarray(0, 5), data.subarray(5))),
          ),
        );
        for (const [i, data] of datas.entries()) {
          expect(results[i]!.md5.equals(md5(data))).toBe(true);
          expect((await readAll(await store.get(ns, ids[i]!))).equals(data)).toBe(true);
        }
        expect(await h.leftovers()).toBe(0);
      },
      big,
    );
  });
}
