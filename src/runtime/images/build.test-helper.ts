/**
 * Builds real OCI (or Docker schema 2) images in tests, and pushes them to a registry with
 * the monolithic upload API. Layers are lists of entries written as tar in code
 * (layer.test-helper.ts, re-exported here), so a test can put anything in one: Debian's
 * static busybox, whiteouts, hard links, devices, or hostile names like `../escape`.
 *
 *   const img = await pushImage(registry.url, 'app:1', {
 *     layers: [busyboxLayer(), [{ path: 'srv/index.html', content: 'hi' }]],
 *     config: { Cmd: ['httpd', '-f', '-p', '8080'], ExposedPorts: ['8080/tcp'] },
 *   });
 *   // img.digest is what the tag names; img.hostDigest the manifest for this host.
 *
 * With `platforms`, the tag names an index with one manifest per platform; each
 * platform's own `layers` are added on top of the common ones.
 */
import { gunzipSync, gzipSync } from 'node:zlib';
import { sha256, tarLayer, type LayerEntry, type PrebuiltLayer } from './layer.test-helper.js';
import { hostPlatform } from './platform.js';

export {
  busyboxLayer,
  DEFAULT_APPLETS,
  sha256,
  tarLayer,
  zeroFileLayer,
  type LayerEntry,
  type PrebuiltLayer,
} from './layer.test-helper.js';

/**
 * A layer: entries to write, or ready-made bytes (tar or tar.gz) used as they are, or
 * ready-made bytes with their diff id (a bomb nobody should inflate to hash it).
 */
export type LayerSpec = LayerEntry[] | Buffer | PrebuiltLayer;

/** The image config fields tests set (Docker's capitalised names, as in the JSON). */
export interface ConfigSpec {
  Entrypoint?: string[];
  Cmd?: string[];
  Env?: string[];
  WorkingDir?: string;
  User?: string;
  StopSignal?: string;
  /** `['8080/tcp', '53/udp']`. */
  ExposedPorts?: string[];
}

export interface PlatformSpec {
  architecture: string;
  os?: string;
  variant?: string;
  /** Layers of this platform only, added after the common ones. */
  layers?: LayerSpec[];
}

export interface ImageSpec {
  layers: LayerSpec[];
  config?: ConfigSpec;
  /** `oci` (default) or `docker` (schema 2 manifest / manifest list media types). */
  format?: 'oci' | 'docker';
  /** How entry lists are compressed: `gzip` (default) or `none`. */
  compression?: 'gzip' | 'none';
  /** Single-platform images are built for this host unless `architecture` says otherwise. */
  architecture?: string;
  /** Make an index with these platforms (plus an `unknown/unknown` attestation entry). */
  platforms?: PlatformSpec[];
}

/** A manifest or index document, as served. */
export interface Doc {
  mediaType: string;
  body: Buffer;
  digest: string;
}

/** A built image: every blob and manifest, ready to push or to serve from a fake registry. */
export interface BuiltImage {
  /** What the tag names: the index when there are platforms, else the manifest. */
  top: Doc;
  /** Platform manifests (one for single-platform images, equal to `top`). */
  manifests: (Doc & { platform: { os: string; architecture: string; variant?: string } })[];
  /** Configs and layers by digest. */
  blobs: Map<string, Buffer>;
  /** The manifest this host would run. */
  hostDigest: string | undefined;
}

/** Diff ids of layers whose bytes came with theirs. */
const knownDiffIds = new WeakMap<Buffer, string>();

function layerBytes(spec: LayerSpec, compression: 'gzip' | 'none'): Buffer {
  if (Buffer.isBuffer(spec)) return spec;
  if (!Array.isArray(spec)) {
    knownDiffIds.set(spec.bytes, spec.diffId);
    return spec.bytes;
  }
  const tar = tarLayer(spec);
  return compression === 'gzip' ? gzipSync(tar) : tar;
}

/** Uncompressed digest of a layer's bytes (its diff id). */
function diffId(bytes: Buffer): string {
  const known = knownDiffIds.get(bytes);
  if (known) return known;
  const gz = bytes[0] === 0x1f && bytes[1] === 0x8b;
  return sha256(gz ? gunzipSync(bytes) : bytes);
}

/** Builds an image in memory (no registry involved). */
export function buildImage(spec: ImageSpec): BuiltImage {
  const docker = spec.format === 'docker';
  const compression = spec.compression ?? 'gzip';
  const types = {
    manifest: docker
      ? 'application/vnd.docker.distribution.manifest.v2+json'
      : 'application/vnd.oci.image.manifest.v1+json',
    index: docker
      ? 'application/vnd.docker.distribution.manifest.list.v2+json'
      : 'application/vnd.oci.image.index.v1+json',
    config: docker
      ? 'application/vnd.docker.container.image.v1+json'
      : 'application/vnd.oci.image.config.v1+json',
    layer: (gz: boolean) =>
      docker
        ? gz
          ? 'application/vnd.docker.image.rootfs.diff.tar.gzip'
          : 'application/vnd.docker.image.rootfs.diff.tar'
        : gz
          ? 'application/vnd.oci.image.layer.v1.tar+gzip'
          : 'application/vnd.oci.image.layer.v1.tar',
  };
  const blobs = new Map<string, Buffer>();
  const common = spec.layers.map((l) => layerBytes(l, compression));
  const host = hostPlatform();
  const platforms: PlatformSpec[] = spec.platforms ?? [
    { architecture: spec.architecture ?? host.architecture },
  ];

  const manifests = platforms.map((p) => {
    const layers = [...common, ...(p.layers ?? []).map((l) => layerBytes(l, compression))];
    const c = spec.config ?? {};
    const config = Buffer.from(
      JSON.stringify({
        architecture: p.architecture,
        os: p.os ?? 'linux',
        ...(p.variant ? { variant: p.variant } : {}),
        config: {
          ...c,
          ExposedPorts: c.ExposedPorts
            ? Object.fromEntries(c.ExposedPorts.map((x) => [x, {}]))
            : undefined,
        },
        rootfs: { type: 'layers', diff_ids: layers.map(diffId) },
        history: layers.map(() => ({ created_by: 'pier test image builder' })),
      }),
    );
    blobs.set(sha256(config), config);
    for (const l of layers) blobs.set(sha256(l), l);
    const body = Buffer.from(
      JSON.stringify({
        schemaVersion: 2,
        mediaType: types.manifest,
        config: { mediaType: types.config, digest: sha256(config), size: config.length },
        layers: layers.map((l) => ({
          mediaType: types.layer(l[0] === 0x1f),
          digest: sha256(l),
          size: l.length,
        })),
      }),
    );
    const platform = {
      os: p.os ?? 'linux',
      architecture: p.architecture,
      ...(p.variant ? { variant: p.variant } : {}),
    };
    return { mediaType: types.manifest, body, digest: sha256(body), platform };
  });

  const matches = (m: (typeof manifests)[number]) =>
    m.platform.os === host.os && m.platform.architecture === host.architecture;
  const hostDigest = manifests.find(matches)?.digest;
  if (!spec.platforms) return { top: manifests[0]!, manifests, blobs, hostDigest };

  const entries = manifests.map((m) => ({
    mediaType: m.mediaType,
    digest: m.digest,
    size: m.body.length,
    platform: m.platform,
  }));
  if (!docker) {
    // What buildx adds: an attestation manifest that must never be chosen.
    const att = manifests[0]!;
    entries.push({
      mediaType: att.mediaType,
      digest: att.digest,
      size: att.body.length,
      platform: { os: 'unknown', architecture: 'unknown' },
    });
  }
  const body = Buffer.from(
    JSON.stringify({ schemaVersion: 2, mediaType: types.index, manifests: entries }),
  );
  return {
    top: { mediaType: types.index, body, digest: sha256(body) },
    manifests,
    blobs,
    hostDigest,
  };
}

/** What {@link pushImage} pushed. */
export interface PushedImage extends BuiltImage {
  /** Shorthand for `top.digest`: what the tag names. */
  digest: string;
  /** `host/name` as a reference prefix, e.g. `127.0.0.1:5123/app`. */
  repository: string;
}

/** Options of {@link pushImage}. */
export interface PushOptions {
  /** Sent as the Authorization header of every request (a registry with token auth). */
  authorization?: string;
}

async function check(res: Response, what: string): Promise<Response> {
  if (!res.ok) throw new Error(`${what}: ${res.status} ${await res.text()}`);
  return res;
}

/**
 * Builds an image and pushes it to the registry at `registryUrl` (`http://127.0.0.1:5000`)
 * as `nameAndTag` (`app:1`, `ns/app:latest`): blobs by monolithic upload (POST then PUT
 * `?digest=`), platform manifests by digest, then the tag.
 */
export async function pushImage(
  registryUrl: string,
  nameAndTag: string,
  spec: ImageSpec,
  opts: PushOptions = {},
): Promise<PushedImage> {
  const [name, tag = 'latest'] = nameAndTag.split(':') as [string, string?];
  const built = buildImage(spec);
  const auth: Record<string, string> = opts.authorization
    ? { authorization: opts.authorization }
    : {};
  const base = registryUrl.replace(/\/$/, '');
  for (const [digest, bytes] of built.blobs) {
    const head = await fetch(`${base}/v2/${name}/blobs/${digest}`, {
      method: 'HEAD',
      headers: auth,
    });
    if (head.ok) continue;
    const started = await check(
      await fetch(`${base}/v2/${name}/blobs/uploads/`, { method: 'POST', headers: auth }),
      `starting the upload of ${digest}`,
    );
    const location = new URL(started.headers.get('location')!, `${base}/`);
    location.searchParams.set('digest', digest);
    await check(
      await fetch(location, {
        method: 'PUT',
        headers: { ...auth, 'content-type': 'application/octet-stream' },
        body: new Uint8Array(bytes),
      }),
      `uploading ${digest}`,
    );
  }
  const putManifest = async (ref: string, doc: Doc) =>
    check(
      await fetch(`${base}/v2/${name}/manifests/${ref}`, {
        method: 'PUT',
        headers: { ...auth, 'content-type': doc.mediaType },
        body: new Uint8Array(doc.body),
      }),
      `pushing the manifest ${ref}`,
    );
  if (spec.platforms) for (const m of built.manifests) await putManifest(m.digest, m);
  await putManifest(tag, built.top);
  return { ...built, digest: built.top.digest, repository: `${new URL(base).host}/${name}` };
}
