/**
 * The registry client against a small fake registry (http.createServer speaking the parts
 * of the v2 protocol a pull uses), for what a real registry will not do on demand:
 * challenges of every kind, schema 1, wrong bytes, silence, 5xx, redirects, the outbound
 * guard (an untrusted registry, token realm or redirect target on loopback), and images
 * past the host's caps (tar bombs, inode bombs, oversized downloads).
 *
 * The fakes listen on 127.0.0.1, which the guard refuses: a store trusts the fakes that
 * were serving when it was made, by host:port (as PIER_TRUSTED_REGISTRIES would).
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  buildImage,
  zeroFileLayer,
  type BuiltImage,
  type LayerEntry,
} from './build.test-helper.js';
import { OutboundGuard } from '../../host/outbound-guard.js';
import { fakeRegistry, type Fake, type Handler } from './fake-registry.test-helper.js';
import type { FetchLike } from './http.js';
import { ImageError, ImageStore, type ImageStoreOptions } from './index.js';

let work: string;
const servers: Fake[] = [];
const image = buildImage({
  layers: [[{ path: 'hello', content: 'world' }]],
  config: { Cmd: ['true'] },
});
const layerDigest = JSON.parse(image.top.body.toString()).layers[0].digest as string;

beforeAll(async () => {
  work = await mkdtemp(path.join(os.tmpdir(), 'pier-images-fake-'));
});
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});
afterAll(async () => {
  if (work) await rm(work, { recursive: true, force: true });
});

async function serve(img: BuiltImage | undefined, handler?: Handler): Promise<Fake> {
  const s = await fakeRegistry(img, handler);
  servers.push(s);
  return s;
}

/** A store trusting every fake serving now (unless `opts.guard` says otherwise). */
async function newStore(opts: Partial<ImageStoreOptions> = {}) {
  const dir = await mkdtemp(path.join(work, 'store-'));
  const guard = new OutboundGuard({ trusted: servers.map((s) => s.host) });
  return { store: new ImageStore({ dir, guard, ...opts }), dir };
}

async function failure(p: Promise<unknown>): Promise<ImageError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ImageError);
  return err as ImageError;
}

describe('authentication', () => {
  it('follows a Bearer challenge to the realm with service, scope and credentials', async () => {
    const token = randomBytes(8).toString('hex');
    let tokenQuery: URLSearchParams | undefined;
    let tokenAuth: string | undefined;
    const realm = await serve(undefined, (req, res) => {
      tokenQuery = new URL(req.url!, 'http://x').searchParams;
      tokenAuth = req.headers.authorization;
      res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ access_token: token }));
      return true;
    });
    const registry = await serve(image, (req, res) => {
      if (req.headers.authorization === `Bearer ${token}`) return false;
      res.writeHead(401, {
        'www-authenticate': `Bearer realm="${realm.url}/token",service="fake registry",scope="repository:app:pull,push"`,
      });
      res.end();
      return true;
    });
    const { store } = await newStore({ credentials: () => ({ username: 'u', password: 'p:w' }) });
    await store.pull(`${registry.host}/app:1`);
    expect(tokenQuery?.get('service')).toBe('fake registry');
    expect(tokenQuery?.get('scope')).toBe('repository:app:pull,push');
    expect(tokenAuth).toBe(`Basic ${Buffer.from('u:p:w').toString('base64')}`);
    expect(realm.requests).toHaveLength(1);
  });

  it('answers a Basic challenge with credentials, and is unauthorized without', async () => {
    const basic = `Basic ${Buffer.from('u:p').toString('base64')}`;
    const registry = await serve(image, (req, res) => {
      if (req.headers.authorization === basic) return false;
      res.writeHead(401, { 'www-authenticate': 'Basic realm="fake"' }).end();
      return true;
    });
    const ok = await newStore({ credentials: () => ({ username: 'u', password: 'p' }) });
    await ok.store.pull(`${registry.host}/app:1`);
    const anon = await newStore();
    expect((await failure(anon.store.pull(`${registry.host}/app:1`))).code).toBe('unauthorized');
  });

  it('never sends credentials to a plain-HTTP realm off this machine', async () => {
    const registry = await serve(image, (_req, res) => {
      res
        .writeHead(401, { 'www-authenticate': 'Bearer realm="http://auth.example.com/token"' })
        .end();
      return true;
    });
    const contacted: string[] = [];
    const guard = new OutboundGuard({ trusted: [registry.host] });
    const spy: FetchLike = (url, init) => {
      contacted.push(url.host);
      return guard.fetch(url, init);
    };
    const { store } = await newStore({
      fetch: spy,
      credentials: () => ({ username: 'u', password: 'p' }),
    });
    expect((await failure(store.pull(`${registry.host}/app:1`))).code).toBe('unsupported');
    expect(contacted.every((h) => h === registry.host)).toBe(true);
  });
});

describe('what registries answer', () => {
  it('uses HTTPS for registries off this machine, and Docker Hub defaults', async () => {
    const urls: string[] = [];
    const record: typeof fetch = (input) => {
      urls.push(String(input instanceof Request ? input.url : input));
      return Promise.reject(new TypeError('fetch failed'));
    };
    const { store } = await newStore({ fetch: record });
    expect((await failure(store.pull('busybox'))).code).toBe('unreachable');
    expect((await failure(store.pull('registry.example.com:8443/ns/app:2'))).code).toBe(
      'unreachable',
    );
    expect(urls).toEqual([
      'https://registry-1.docker.io/v2/library/busybox/manifests/latest',
      'https://registry.example.com:8443/v2/ns/app/manifests/2',
    ]);
  });

  it('refuses schema 1 and artifacts that are not images', async () => {
    const schema1 = await serve(undefined, (_req, res) => {
      res.writeHead(200, {
        'content-type': 'application/vnd.docker.distribution.manifest.v1+prettyjws',
      });
      res.end(JSON.stringify({ schemaVersion: 1, name: 'app', tag: '1', fsLayers: [] }));
      return true;
    });
    const { store } = await newStore();
    const err = await failure(store.pull(`${schema1.host}/app:1`));
    expect(err.code).toBe('unsupported');
    expect(err.message).toMatch(/schema 1/);

    const helm = buildImage({ layers: [[{ path: 'chart' }]] });
    const m = JSON.parse(helm.top.body.toString());
    m.config.mediaType = 'application/vnd.cncf.helm.config.v1+json';
    const body = Buffer.from(JSON.stringify(m));
    const chart = await serve(undefined, (_req, res) => {
      res
        .writeHead(200, { 'content-type': 'application/vnd.oci.image.manifest.v1+json' })
        .end(body);
      return true;
    });
    const later = await newStore(); // trusts the fake served since
    expect((await failure(later.store.pull(`${chart.host}/app:1`))).code).toBe('unsupported');
  });

  it('says unreachable for 5xx, 429 and silence', async () => {
    for (const status of [503, 429]) {
      const s = await serve(undefined, (_req, res) => {
        res.writeHead(status).end();
        return true;
      });
      const { store } = await newStore();
      expect((await failure(store.pull(`${s.host}/app:1`))).code).toBe('unreachable');
    }
    const silent = await serve(undefined, () => true); // never answers
    const { store } = await newStore({ timeoutMs: 300 });
    const err = await failure(store.pull(`${silent.host}/app:1`));
    expect(err.code).toBe('unreachable');
    expect(err.message).toMatch(/did not answer in time/);
  });

  it('times out a blob that stalls halfway, and keeps nothing', async () => {
    const s = await serve(image, (req, res) => {
      if (!req.url?.includes(layerDigest)) return false;
      res.writeHead(200);
      res.write(image.blobs.get(layerDigest)!.subarray(0, 10)); // then nothing more
      return true;
    });
    const { store, dir } = await newStore({ timeoutMs: 300 });
    expect((await failure(store.pull(`${s.host}/app:1`))).code).toBe('unreachable');
    expect(await readdir(path.join(dir, 'blobs/tmp'))).toEqual([]);
  });

  it('says digest-mismatch for wrong bytes, wrong sizes and a lying digest header', async () => {
    const cases: Handler[] = [
      (req, res) => {
        if (!req.url?.includes(layerDigest)) return false;
        const bytes = Buffer.from(image.blobs.get(layerDigest)!);
        bytes[5] = bytes[5]! ^ 1;
        res.writeHead(200).end(bytes);
        return true;
      },
      (req, res) => {
        if (!req.url?.includes(layerDigest)) return false;
        res.writeHead(200).end(Buffer.concat([image.blobs.get(layerDigest)!, Buffer.from('more')]));
        return true;
      },
      (req, res) => {
        // HEAD gives no digest, so the manifest is fetched by tag: its header lies.
        if (!req.url?.endsWith('/manifests/1')) return false;
        res.writeHead(200, {
          'content-type': image.top.mediaType,
          ...(req.method === 'HEAD' ? {} : { 'docker-content-digest': `sha256:${'c'.repeat(64)}` }),
        });
        res.end(req.method === 'HEAD' ? undefined : image.top.body);
        return true;
      },
    ];
    for (const handler of cases) {
      const s = await serve(image, handler);
      const { store, dir } = await newStore();
      expect((await failure(store.pull(`${s.host}/app:1`))).code).toBe('digest-mismatch');
      expect(await readdir(path.join(dir, 'blobs/tmp'))).toEqual([]);
      expect(await readdir(path.join(dir, 'roots-userns'))).toEqual([]);
    }
  });

  it('falls back to GET when HEAD gives no digest', async () => {
    const s = await serve(image, (req, res) => {
      if (req.method !== 'HEAD') return false;
      res.writeHead(200, { 'content-type': image.top.mediaType }).end();
      return true;
    });
    const { store } = await newStore();
    expect((await store.pull(`${s.host}/app:1`)).digest).toBe(image.top.digest);
  });
});

describe('redirects', () => {
  it('follows a blob redirect to another host without the Authorization header', async () => {
    const cdn = await serve(image);
    const registry = await serve(image, (req, res) => {
      if (req.headers.authorization !== 'Basic dTpw') {
        res.writeHead(401, { 'www-authenticate': 'Basic realm="r"' }).end();
        return true;
      }
      if (!req.url?.includes('/blobs/')) return false;
      res.writeHead(307, { location: `${cdn.url}${req.url}` }).end();
      return true;
    });
    const { store } = await newStore({ credentials: () => ({ username: 'u', password: 'p' }) });
    const pulled = await store.pull(`${registry.host}/app:1`);
    expect(pulled.digest).toBe(image.top.digest);
    expect(cdn.requests.map((r) => r.path).sort()).toEqual(
      [...image.blobs.keys()].map((d) => `/v2/app/blobs/${d}`).sort(),
    );
    expect(cdn.requests.every((r) => r.authorization === undefined)).toBe(true);
  });

  it('refuses redirects to other schemes', async () => {
    for (const location of [
      'file:///etc/passwd',
      'https://127.0.0.1:1/blob',
      'ftp://127.0.0.1/blob',
    ]) {
      const s = await serve(image, (req, res) => {
        if (!req.url?.includes('/blobs/')) return false;
        res.writeHead(302, { location }).end();
        return true;
      });
      const { store } = await newStore();
      const err = await failure(store.pull(`${s.host}/app:1`));
      expect(err.code).toBe('unsupported');
      expect(err.message).toMatch(/redirect/);
    }
  });
});

describe('caps on one image', () => {
  const MIB = 1024 * 1024;
  const limits = { maxUnpackedBytes: MIB, maxEntries: 50, maxDownloadBytes: 4 * MIB };
  const nothing = { blobs: [], tmpBlobs: [], roots: [], images: [] };

  /** Everything a pull can leave in a store dir. */
  async function leftovers(dir: string) {
    return {
      blobs: await readdir(path.join(dir, 'blobs/sha256')),
      tmpBlobs: await readdir(path.join(dir, 'blobs/tmp')),
      roots: await readdir(path.join(dir, 'roots-userns')),
      images: await readdir(path.join(dir, 'images')),
    };
  }

  it('refuses a tar bomb quickly and keeps nothing', async () => {
    // One file of 100 MiB of zeros (a sparse file's apparent size), ~100 KiB compressed.
    const bomb = buildImage({ layers: [zeroFileLayer('zeros', 100 * MIB)] });
    const s = await serve(bomb);
    const { store, dir } = await newStore({ limits });
    const started = Date.now();
    const err = await failure(store.pull(`${s.host}/app:1`));
    expect(err.code).toBe('too-large');
    expect(err.message).toMatch(
      /app:1 unpacks to more than 1 MiB, this host's cap on one image \(PIER_IMAGE_MAX_UNPACKED_GB\)/,
    );
    expect(Date.now() - started).toBeLessThan(3000);
    expect(await leftovers(dir)).toEqual(nothing);
  });

  it('refuses an image of a thousand empty files and keeps nothing', async () => {
    const files = Array.from({ length: 1000 }, (_, i): LayerEntry => ({ path: `d/f${i}` }));
    const s = await serve(buildImage({ layers: [files] }));
    const { store, dir } = await newStore({ limits });
    const err = await failure(store.pull(`${s.host}/app:1`));
    expect(err.code).toBe('too-large');
    expect(err.message).toMatch(
      /more than 50 files, directories and links.*PIER_IMAGE_MAX_ENTRIES/,
    );
    expect(await leftovers(dir)).toEqual(nothing);
  });

  it('counts hard links once, and pulls an image within the caps', async () => {
    const big = Buffer.alloc(600 * 1024, 'a');
    const links = Array.from({ length: 20 }, (_, i): LayerEntry => ({
      path: `link${i}`,
      type: 'link',
      target: 'big',
    }));
    const linked = await serve(
      buildImage({
        layers: [
          [{ path: 'big', content: big }, ...links],
          [{ path: 'etc/hostname', content: 'x' }],
        ],
      }),
    );
    // The same bytes twice, as two files in two layers: over the cap.
    const twice = await serve(
      buildImage({ layers: [[{ path: 'a', content: big }], [{ path: 'b', content: big }]] }),
    );
    const { store } = await newStore({ limits });
    const pulled = await store.pull(`${linked.host}/app:1`);
    expect(pulled.sizeBytes).toBe(big.length + 1);
    expect((await stat(path.join(pulled.rootfs, 'link19'))).nlink).toBe(21);
    const fresh = await newStore({ limits });
    expect((await failure(fresh.store.pull(`${twice.host}/app:1`))).code).toBe('too-large');
    expect(await leftovers(fresh.dir)).toEqual(nothing);
  });

  it('refuses layers declared past the download cap before fetching a blob', async () => {
    const noisy = buildImage({ layers: [[{ path: 'noise', content: randomBytes(300 * 1024) }]] });
    const s = await serve(noisy);
    const { store, dir } = await newStore({ limits: { ...limits, maxDownloadBytes: 256 * 1024 } });
    const err = await failure(store.pull(`${s.host}/app:1`));
    expect(err.code).toBe('too-large');
    expect(err.message).toMatch(/more than the 256 KiB .*PIER_IMAGE_MAX_DOWNLOAD_GB/);
    expect(s.requests.filter((r) => r.path.includes('/blobs/'))).toEqual([]);
    expect(await leftovers(dir)).toEqual(nothing);
  });

  it('refuses a blob announced or sent past its declared size without waiting for it', async () => {
    const bytes = image.blobs.get(layerDigest)!;
    const cases: Handler[] = [
      // Announces 10 GiB, sends a little, then stalls: refused on the header.
      (req, res) => {
        if (!req.url?.includes(layerDigest)) return false;
        res.writeHead(200, { 'content-length': String(10 * 1024 ** 3) });
        res.write(bytes.subarray(0, 10));
        return true;
      },
      // Sends without end and without a length: cut off at the first byte too many.
      (req, res) => {
        if (!req.url?.includes(layerDigest)) return false;
        res.writeHead(200);
        const timer = setInterval(() => res.write(Buffer.alloc(64 * 1024)), 5);
        res.on('close', () => clearInterval(timer));
        return true;
      },
    ];
    for (const handler of cases) {
      const s = await serve(image, handler);
      const { store, dir } = await newStore({ timeoutMs: 5000 });
      const started = Date.now();
      const err = await failure(store.pull(`${s.host}/app:1`));
      expect(err.code).toBe('digest-mismatch');
      expect(err.message).toMatch(/more than the \d+ its manifest gives|longer than the \d+ bytes/);
      expect(Date.now() - started).toBeLessThan(2000);
      expect(await readdir(path.join(dir, 'blobs/tmp'))).toEqual([]);
      expect(await readdir(path.join(dir, 'roots-userns'))).toEqual([]);
    }
  });
});

describe('aborting', () => {
  it('rejects with the caller’s reason while a blob is downloading', async () => {
    const s = await serve(image, (req, res) => {
      if (!req.url?.includes(layerDigest)) return false;
      res.writeHead(200);
      res.write(image.blobs.get(layerDigest)!.subarray(0, 10));
      return true;
    });
    const { store, dir } = await newStore();
    const controller = new AbortController();
    const progress: number[] = [];
    const pulling = store.pull(`${s.host}/app:1`, {
      signal: controller.signal,
      onProgress: (p) => progress.push(p.bytes),
    });
    while (!s.requests.some((r) => r.path.includes(layerDigest)))
      await new Promise((r) => setTimeout(r, 10));
    controller.abort();
    const err = await pulling.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DOMException);
    expect((err as DOMException).name).toBe('AbortError');
    // The temp blob goes once the aborted stream is closed: within a moment, even on a
    // busy host.
    for (let i = 0; i < 40; i++) {
      if ((await readdir(path.join(dir, 'blobs/tmp'))).length === 0) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(await readdir(path.join(dir, 'blobs/tmp'))).toEqual([]);
  });
});

describe('the outbound guard', () => {
  const loopback =
    /127\.0\.0\.1 is a loopback address; an operator can allow it with PIER_ALLOW_PRIVATE_TARGETS=1 or PIER_TRUSTED_REGISTRIES/;

  it('refuses a registry on loopback that is not trusted, before connecting', async () => {
    const s = await serve(image);
    const { store } = await newStore({ guard: new OutboundGuard() });
    const err = await failure(store.pull(`${s.host}/app:1`));
    expect(err.code).toBe('refused');
    expect(err.message).toMatch(loopback);
    expect(err.message).toContain(s.host);
    expect(s.requests).toEqual([]);
    // Another port of the same address is another registry: trusting one trusts only it.
    const other = await serve(image);
    const trustsOther = await newStore({ guard: new OutboundGuard({ trusted: [other.host] }) });
    expect((await failure(trustsOther.store.pull(`${s.host}/app:1`))).code).toBe('refused');
    expect(s.requests).toEqual([]);
  });

  it('lets the same registry through when trusted, or when private targets are allowed', async () => {
    const s = await serve(image);
    const trusted = await newStore({ guard: new OutboundGuard({ trusted: [s.host] }) });
    expect((await trusted.store.pull(`${s.host}/app:1`)).digest).toBe(image.top.digest);
    const open = await newStore({ guard: new OutboundGuard({ allowPrivate: true }) });
    expect((await open.store.pull(`${s.host}/app:1`)).digest).toBe(image.top.digest);
  });

  it('refuses a token realm on a private address, and sends it no credentials', async () => {
    const realm = await serve(undefined, (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"token":"t"}');
      return true;
    });
    for (const realmUrl of [
      `${realm.url}/token`,
      `http://localhost:${realm.url.split(':')[2]}/token`,
    ]) {
      const registry = await serve(image, (req, res) => {
        if (req.headers.authorization === 'Bearer t') return false;
        res.writeHead(401, { 'www-authenticate': `Bearer realm="${realmUrl}"` }).end();
        return true;
      });
      const { store } = await newStore({
        guard: new OutboundGuard({ trusted: [registry.host] }),
        credentials: () => ({ username: 'u', password: 'p' }),
      });
      const err = await failure(store.pull(`${registry.host}/app:1`));
      expect(err.code).toBe('refused');
      expect(err.message).toMatch(/is a loopback address/);
      expect(realm.requests).toEqual([]);
    }
    // Trusted too, the realm answers and the pull works.
    const registry = await serve(image, (req, res) => {
      if (req.headers.authorization === 'Bearer t') return false;
      res.writeHead(401, { 'www-authenticate': `Bearer realm="${realm.url}/token"` }).end();
      return true;
    });
    const { store } = await newStore({
      guard: new OutboundGuard({ trusted: [registry.host, realm.host] }),
    });
    expect((await store.pull(`${registry.host}/app:1`)).digest).toBe(image.top.digest);
    expect(realm.requests).toHaveLength(1);
  });

  it('checks every redirect hop: a blob redirect to an untrusted address is refused', async () => {
    const cdn = await serve(image);
    const registry = await serve(image, (req, res) => {
      if (!req.url?.includes('/blobs/')) return false;
      res.writeHead(307, { location: `${cdn.url}${req.url}` }).end();
      return true;
    });
    const refused = await newStore({ guard: new OutboundGuard({ trusted: [registry.host] }) });
    const err = await failure(refused.store.pull(`${registry.host}/app:1`));
    expect(err.code).toBe('refused');
    expect(err.message).toMatch(loopback);
    expect(err.message).toContain(cdn.host);
    expect(cdn.requests).toEqual([]);
    expect(await readdir(path.join(refused.dir, 'roots-userns'))).toEqual([]);

    const both = await newStore({
      guard: new OutboundGuard({ trusted: [registry.host, cdn.host] }),
    });
    expect((await both.store.pull(`${registry.host}/app:1`)).digest).toBe(image.top.digest);
    expect(cdn.requests.length).toBeGreaterThan(0);
  });
});
