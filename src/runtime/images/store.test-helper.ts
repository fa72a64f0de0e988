/**
 * The shared setup of the ImageStore tests that use the real registry: one registry and
 * one scratch dir per test file, stores in fresh dirs with a fetch that records every
 * request, and a way to push an image under a repository of its own.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect } from 'vitest';
import { startRegistry, type TestRegistry } from '../../../test/helpers/registry.js';
import { OutboundGuard } from '../../host/outbound-guard.js';
import { pushImage, type ImageSpec } from './build.test-helper.js';
import type { FetchLike } from './http.js';
import { ImageError, ImageStore, type ImageStoreOptions } from './index.js';

/** Starts a registry for the calling test file; the getters work inside tests. */
export function useRegistry() {
  let registry: TestRegistry | undefined;
  let work: string | undefined;
  beforeAll(async () => {
    registry = await startRegistry();
    work = await mkdtemp(path.join(os.tmpdir(), 'pier-images-'));
  });
  afterAll(async () => {
    await registry?.stop();
    if (work) await rm(work, { recursive: true, force: true });
  });

  return {
    get registry(): TestRegistry {
      return registry!;
    },

    /**
     * The outbound guard of these stores: the local registry is on 127.0.0.1, trusted by
     * name and port as an operator would (PIER_TRUSTED_REGISTRIES), not by switching the
     * guard off.
     */
    get guard(): OutboundGuard {
      return new OutboundGuard({ trusted: [registry!.host] });
    },

    /**
     * A store in a fresh dir, with a fetch that records every request (`METHOD /path`)
     * and sends it through the guard.
     */
    async newStore(opts: Partial<ImageStoreOptions> = {}) {
      const dir = await mkdtemp(path.join(work!, 'store-'));
      const requests: string[] = [];
      const guard = opts.guard ?? new OutboundGuard({ trusted: [registry!.host] });
      const counting: FetchLike = (url, init) => {
        requests.push(`${init.method} ${url.pathname}`);
        return guard.fetch(url, init);
      };
      const store = new ImageStore({ dir, fetch: counting, ...opts, guard });
      return { store, dir, requests };
    },

    /** Pushes `spec` under a repository of its own; `repo` is `host/name`. */
    async push(spec: ImageSpec, tag = '1') {
      const name = `t${randomBytes(4).toString('hex')}`;
      const image = await pushImage(registry!.url, `${name}:${tag}`, spec);
      return {
        image,
        name,
        ref: `${registry!.host}/${name}:${tag}`,
        repo: `${registry!.host}/${name}`,
      };
    },
  };
}

/** The ImageError a promise rejects with (fails the test if it resolves or throws another). */
export async function rejection(p: Promise<unknown>): Promise<ImageError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ImageError);
  return err as ImageError;
}

/** What a failed pull might leave in a store dir: temp blobs, roots, records. */
export async function leftovers(dir: string) {
  return {
    tmpBlobs: await readdir(path.join(dir, 'blobs/tmp')),
    roots: await readdir(path.join(dir, 'roots-userns')),
    images: await readdir(path.join(dir, 'images')),
  };
}
