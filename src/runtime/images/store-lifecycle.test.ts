/**
 * ImageStore over time, against a real registry: concurrent pulls sharing one download,
 * tags that move, restarts without the network, removal, and callers that give up.
 */
import { existsSync } from 'node:fs';
import { readFile, readdir } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { busyboxLayer, pushImage } from './build.test-helper.js';
import type { FetchLike } from './http.js';
import { ImageStore } from './index.js';
import { leftovers, rejection, useRegistry } from './store.test-helper.js';

const env = useRegistry();
const { newStore, push } = env;

describe('sharing, restarts and removal', () => {
  it('shares one download and one unpack between concurrent pulls', async () => {
    const { image, ref, repo, name } = await push({
      layers: [busyboxLayer(), [{ path: 'second', content: 'layer' }]],
    });
    const { store, dir, requests } = await newStore();
    const progress: { layer: string; bytes: number; total?: number }[] = [];
    const pulls = await Promise.all([
      store.pull(ref, { onProgress: (p) => progress.push(p) }),
      store.pull(ref),
      store.pull(ref),
      store.pull(`${repo}@${image.digest}`),
    ]);
    expect(new Set(pulls.map((p) => p.rootfs)).size).toBe(1);
    expect(await readdir(path.join(dir, 'roots-userns'))).toEqual([image.digest.slice(7)]);
    const blobGets = requests.filter((r) => r.startsWith('GET') && r.includes('/blobs/'));
    expect(blobGets).toHaveLength(3); // config + 2 layers, once each
    expect(requests.filter((r) => r.startsWith('HEAD'))).toHaveLength(1);
    // The by-digest pull fetched its manifest itself but joined the same unpack.
    const manifestGets = requests.filter((r) => r.startsWith('GET') && r.includes('/manifests/'));
    expect(manifestGets.length).toBeGreaterThanOrEqual(1);
    expect(manifestGets.length).toBeLessThanOrEqual(2);
    const layers = JSON.parse(image.manifests[0]!.body.toString()).layers as {
      digest: string;
      size: number;
    }[];
    for (const l of layers) {
      expect(progress.filter((p) => p.layer === l.digest).at(-1)).toEqual({
        layer: l.digest,
        bytes: l.size,
        total: l.size,
      });
    }

    // Pulling the tag again costs one HEAD and reuses the root.
    requests.length = 0;
    expect((await store.pull(ref)).rootfs).toBe(pulls[0]!.rootfs);
    expect(requests).toEqual([`HEAD /v2/${name}/manifests/1`]);
  });

  it('pulls a moved tag again but reuses shared layers', async () => {
    const base = busyboxLayer(['sh']);
    const { ref, name } = await push({ layers: [base, [{ path: 'v', content: '1' }]] });
    const { store, requests } = await newStore();
    const first = await store.pull(ref);
    await pushImage(env.registry.url, `${name}:1`, {
      layers: [base, [{ path: 'v', content: '2' }]],
    });
    requests.length = 0;
    const second = await store.pull(ref);
    expect(second.digest).not.toBe(first.digest);
    expect(await readFile(path.join(second.rootfs, 'v'), 'utf8')).toBe('2');
    // config + the new layer; the busybox layer is already here
    expect(requests.filter((r) => r.includes('/blobs/'))).toHaveLength(2);
  });

  it('finds pulled images after a restart without the network', async () => {
    const { image, ref, repo } = await push({
      layers: [busyboxLayer(['sh'])],
      config: { Cmd: ['sh'] },
    });
    const { store, dir } = await newStore();
    const pulled = await store.pull(ref);

    const offline = () => Promise.reject(new TypeError('fetch failed'));
    const restarted = new ImageStore({ dir, fetch: offline, guard: env.guard });
    expect(await restarted.get(pulled.digest)).toEqual(pulled);
    expect(await restarted.pull(`${repo}@${image.digest}`)).toMatchObject({
      digest: pulled.digest,
    });
    expect((await rejection(restarted.pull(ref))).code).toBe('unreachable'); // a tag needs the registry
    expect(await restarted.get(`sha256:${'b'.repeat(64)}`)).toBeUndefined();
  });

  it('removes an image, its root and the blobs no other image uses', async () => {
    const shared = busyboxLayer(['sh']);
    const a = await push({ layers: [shared, [{ path: 'a' }]] });
    const b = await push({ layers: [shared, [{ path: 'b' }]] });
    const { store, dir } = await newStore();
    const pa = await store.pull(a.ref);
    const pb = await store.pull(b.ref);
    const blobCount = async () => (await readdir(path.join(dir, 'blobs/sha256'))).length;
    expect(await blobCount()).toBe(7); // 2 manifests, 2 configs, 3 layers
    await store.remove(pa.digest);
    expect(await store.get(pa.digest)).toBeUndefined();
    expect(existsSync(pa.rootfs)).toBe(false);
    expect(await blobCount()).toBe(4); // b's manifest, config and both its layers stay
    expect((await store.get(pb.digest))?.rootfs).toBe(pb.rootfs);
    await store.remove(pa.digest); // idempotent
    await store.remove(pb.digest);
    expect(await blobCount()).toBe(0);
  });

  it('stops a pull when its caller aborts and leaves nothing half done', async () => {
    const { ref } = await push({ layers: [busyboxLayer()] });
    const guard = env.guard;
    const slow: FetchLike = async (url, init) => {
      await new Promise((r) => setTimeout(r, 50));
      return guard.fetch(url, init);
    };
    const { store, dir } = await newStore({ fetch: slow });
    const controller = new AbortController();
    const pulling = store.pull(ref, { signal: controller.signal });
    setTimeout(() => controller.abort(new Error('changed my mind')), 120);
    await expect(pulling).rejects.toThrow('changed my mind');
    await new Promise((r) => setTimeout(r, 200)); // let the aborted work unwind
    expect(await leftovers(dir)).toEqual({ tmpBlobs: [], roots: [], images: [] });
    // A later pull starts afresh and succeeds.
    expect(existsSync(path.join((await store.pull(ref)).rootfs, 'bin/busybox'))).toBe(true);
  });
});
