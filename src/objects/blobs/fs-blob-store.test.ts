import { randomBytes } from 'node:crypto';
import { mkdtemp, mkdir, readdir, rm, stat, utimes, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BlobError } from './blob-store.js';
import {
  blobStoreContract,
  bodyOf,
  md5,
  newName,
  readAll,
  type BlobStoreHarness,
} from './contract.test-helper.js';
import { FsBlobStore, sweepTemp } from './fs-blob-store.js';

const HOUR = 3_600_000;

async function tempRoot(): Promise<string> {
  return mkdtemp(path.join(os.tmpdir(), 'pier-blobs-'));
}

blobStoreContract('FsBlobStore', async (): Promise<BlobStoreHarness> => {
  const root = await tempRoot();
  const store = await FsBlobStore.open(path.join(root, 'objects'));
  return {
    store,
    leftovers: async () => (await readdir(path.join(store.root, '.tmp'))).length,
    rssBudget: 64 * 1024 * 1024,
    cleanup: () => rm(root, { recursive: true, force: true }),
  };
});

describe('FsBlobStore on disk', () => {
  let root: string;
  let store: FsBlobStore;
  const ns = 'bkt-test';

  beforeAll(async () => {
    root = await tempRoot();
    store = await FsBlobStore.open(path.join(root, 'objects'));
  });

  afterAll(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it('creates its root private, and keeps blobs private under <ns>/<2 chars>/<id>', async () => {
    expect((await stat(store.root)).mode & 0o777).toBe(0o700);
    expect((await stat(path.join(store.root, '.tmp'))).mode & 0o777).toBe(0o700);
    await store.put(ns, 'xyblob', bodyOf(Buffer.from('hello')));
    const file = path.join(store.root, ns, 'xy', 'xyblob');
    expect(store.pathOf(ns, 'xyblob')).toBe(file);
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect((await stat(path.dirname(file))).mode & 0o777).toBe(0o700);
  });

  it('keeps serving a reader the bytes it opened, across an overwrite and a delete', async () => {
    const id = newName();
    const first = randomBytes(4 * 1024 * 1024);
    await store.put(ns, id, bodyOf(first));
    const reading = await store.get(ns, id);
    await store.put(ns, id, bodyOf(randomBytes(100)));
    await store.delete(ns, id);
    expect((await readAll(reading)).equals(first)).toBe(true);
  });

  it('reports a failing disk as backend, and removes its temp file', async () => {
    // A file where the namespace's directory should be: the final mkdir fails.
    const blocked = newName('ns');
    await writeFile(path.join(store.root, blocked), 'not a directory');
    const err = await store.put(blocked, newName(), bodyOf(randomBytes(1000))).catch((e) => e);
    expect(err).toBeInstanceOf(BlobError);
    expect((err as BlobError).code).toBe('backend');
    expect(await readdir(path.join(store.root, '.tmp'))).toEqual([]);
  });

  it('lists by modification time', async () => {
    const space = newName('ns');
    const [old, fresh] = [newName(), newName()];
    await store.put(space, old, bodyOf(Buffer.from('old')));
    await store.put(space, fresh, bodyOf(Buffer.from('fresh')));
    const twoHoursAgo = new Date(Date.now() - 2 * HOUR);
    await utimes(store.pathOf(space, old), twoHoursAgo, twoHoursAgo);
    const found: string[] = [];
    for await (const id of store.listOlderThan(space, new Date(Date.now() - HOUR))) found.push(id);
    expect(found).toEqual([old]);
  });

  it('concatenates no parts into an empty blob, and a blob into itself', async () => {
    const empty = await store.concat(ns, 'empty-one', []);
    expect(empty.size).toBe(0);
    const id = newName();
    const data = randomBytes(1000);
    await store.put(ns, id, bodyOf(data));
    const doubled = await store.concat(ns, id, [id, id]);
    expect(doubled.md5.equals(md5(Buffer.concat([data, data])))).toBe(true);
    expect(await store.stat(ns, id)).toEqual({ size: 2000 });
  });

  it('works when constructed directly, creating its directories on first write', async () => {
    const direct = new FsBlobStore(path.join(root, 'direct'));
    await direct.put(ns, 'abc', bodyOf(Buffer.from('x')));
    expect(await direct.stat(ns, 'abc')).toEqual({ size: 1 });
  });
});

describe('sweepTemp', () => {
  it('removes only temp entries older than the cutoff, files and directories alike', async () => {
    const root = await tempRoot();
    const tmp = path.join(root, '.tmp');
    await mkdir(path.join(tmp, 'trash-old', 'ab'), { recursive: true });
    await writeFile(path.join(tmp, 'trash-old', 'ab', 'abc'), 'x');
    await writeFile(path.join(tmp, 'old-file'), 'x');
    await writeFile(path.join(tmp, 'new-file'), 'x');
    const twoHoursAgo = new Date(Date.now() - 2 * HOUR);
    await utimes(path.join(tmp, 'old-file'), twoHoursAgo, twoHoursAgo);
    await utimes(path.join(tmp, 'trash-old'), twoHoursAgo, twoHoursAgo);
    expect(await sweepTemp(root, new Date(Date.now() - HOUR))).toBe(2);
    expect(await readdir(tmp)).toEqual(['new-file']);
    expect(await sweepTemp(path.join(root, 'missing'), new Date())).toBe(0);
    await rm(root, { recursive: true, force: true });
  });

  it('runs when the store is opened, sparing recent temp files', async () => {
    const root = await tempRoot();
    const tmp = path.join(root, '.tmp');
    await mkdir(tmp);
    await writeFile(path.join(tmp, 'crashed'), 'x');
    await writeFile(path.join(tmp, 'in-flight'), 'x');
    const twoHoursAgo = new Date(Date.now() - 2 * HOUR);
    await utimes(path.join(tmp, 'crashed'), twoHoursAgo, twoHoursAgo);
    const store = await FsBlobStore.open(root);
    expect(await readdir(tmp)).toEqual(['in-flight']);
    expect(await store.sweepTemp(new Date(Date.now() + HOUR))).toBe(1);
    await rm(root, { recursive: true, force: true });
  });
});
