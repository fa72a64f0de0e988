/**
 * Manifests and indexes, OCI and Docker schema 2: the media types we accept, their shapes
 * (checked with zod, since a registry is an untrusted peer), and which layer and config
 * types we know how to use. Schema 1 is refused: it is deprecated, unsigned in practice,
 * and has no content-addressed config.
 */
import { z } from 'zod';
import { ImageError } from './errors.js';

export const OCI_INDEX = 'application/vnd.oci.image.index.v1+json';
export const OCI_MANIFEST = 'application/vnd.oci.image.manifest.v1+json';
export const DOCKER_LIST = 'application/vnd.docker.distribution.manifest.list.v2+json';
export const DOCKER_MANIFEST = 'application/vnd.docker.distribution.manifest.v2+json';
const SCHEMA1 = [
  'application/vnd.docker.distribution.manifest.v1+json',
  'application/vnd.docker.distribution.manifest.v1+prettyjws',
];

/** The `Accept` header of manifest requests: everything we can read, nothing else. */
export const MANIFEST_ACCEPT = [OCI_INDEX, OCI_MANIFEST, DOCKER_LIST, DOCKER_MANIFEST].join(', ');

export const CONFIG_TYPES = new Set([
  'application/vnd.oci.image.config.v1+json',
  'application/vnd.docker.container.image.v1+json',
]);

/**
 * Layer media types we unpack. Compression is sniffed from the bytes when unpacking (some
 * tools label gzip layers as plain tar); the media type only has to be one of these.
 * Non-distributable ("foreign") layers are fetched from the registry like any other: we
 * never follow their `urls`, which would reach hosts the reference did not name.
 */
export const LAYER_TYPES = new Set([
  'application/vnd.oci.image.layer.v1.tar',
  'application/vnd.oci.image.layer.v1.tar+gzip',
  'application/vnd.oci.image.layer.nondistributable.v1.tar',
  'application/vnd.oci.image.layer.nondistributable.v1.tar+gzip',
  'application/vnd.docker.image.rootfs.diff.tar',
  'application/vnd.docker.image.rootfs.diff.tar.gzip',
  'application/vnd.docker.image.rootfs.foreign.diff.tar.gzip',
]);

const digest = z.string().regex(/^[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[a-zA-Z0-9=_-]+$/);

const platform = z.object({
  architecture: z.string(),
  os: z.string(),
  variant: z.string().optional(),
  'os.version': z.string().optional(),
});

const descriptor = z.object({
  mediaType: z.string(),
  digest,
  size: z.number().int().nonnegative(),
  platform: platform.optional(),
});

const manifestSchema = z.object({
  schemaVersion: z.literal(2),
  mediaType: z.string().optional(),
  config: descriptor,
  layers: z.array(descriptor).max(256),
});

const indexSchema = z.object({
  schemaVersion: z.literal(2),
  mediaType: z.string().optional(),
  manifests: z.array(descriptor).max(1024),
});

export type Descriptor = z.infer<typeof descriptor>;
export type Platform = z.infer<typeof platform>;
export type ImageManifest = z.infer<typeof manifestSchema>;
export type ImageIndex = z.infer<typeof indexSchema>;

/** A manifest document, classified. */
export type ManifestDoc =
  | { kind: 'index'; mediaType: string; index: ImageIndex }
  | { kind: 'manifest'; mediaType: string; manifest: ImageManifest };

/** Throws `unsupported` unless `d` is a sha256 digest (the only kind we verify). */
export function assertSha256(d: string, what: string): void {
  if (!/^sha256:[a-f0-9]{64}$/.test(d)) {
    throw new ImageError(
      'unsupported',
      `${what} has digest ${d}; only sha256 digests are supported.`,
    );
  }
}

/**
 * Classifies and validates a manifest body. The media type comes from the body when it
 * names one, else from the Content-Type, else from the shape (old registries answer
 * `application/json`).
 */
export function parseManifest(body: Buffer, contentType: string | null, what: string): ManifestDoc {
  let json: unknown;
  try {
    json = JSON.parse(body.toString('utf8'));
  } catch {
    throw new ImageError('unsupported', `The manifest of ${what} is not JSON.`);
  }
  const header = (contentType ?? '').split(';')[0]!.trim().toLowerCase();
  const obj = (json && typeof json === 'object' ? json : {}) as Record<string, unknown>;
  const declared = typeof obj.mediaType === 'string' ? obj.mediaType : header;
  if (obj.schemaVersion === 1 || SCHEMA1.includes(declared) || SCHEMA1.includes(header)) {
    throw new ImageError(
      'unsupported',
      `${what} is a Docker schema 1 image, which is not supported; push it again with a current client.`,
    );
  }
  let kind: 'index' | 'manifest' | undefined;
  if (declared === OCI_INDEX || declared === DOCKER_LIST) kind = 'index';
  else if (declared === OCI_MANIFEST || declared === DOCKER_MANIFEST) kind = 'manifest';
  else if (!declared || declared === 'application/json') {
    kind = Array.isArray(obj.manifests)
      ? 'index'
      : Array.isArray(obj.layers)
        ? 'manifest'
        : undefined;
  }
  if (!kind) {
    throw new ImageError(
      'unsupported',
      `${what} has media type "${declared || 'none'}", which is not an image manifest or index.`,
    );
  }
  const mediaType =
    declared && declared !== 'application/json'
      ? declared
      : kind === 'index'
        ? OCI_INDEX
        : OCI_MANIFEST;
  if (kind === 'index') {
    const r = indexSchema.safeParse(json);
    if (!r.success) throw new ImageError('unsupported', `The image index of ${what} is malformed.`);
    return { kind, mediaType, index: r.data };
  }
  const r = manifestSchema.safeParse(json);
  if (!r.success) throw new ImageError('unsupported', `The manifest of ${what} is malformed.`);
  const m = r.data;
  if (!CONFIG_TYPES.has(m.config.mediaType)) {
    throw new ImageError(
      'unsupported',
      `${what} has a config of type "${m.config.mediaType}": it is not a container image.`,
    );
  }
  assertSha256(m.config.digest, `The config of ${what}`);
  for (const layer of m.layers) {
    if (layer.mediaType.endsWith('+zstd')) {
      throw new ImageError(
        'unsupported',
        `${what} has zstd-compressed layers, which are not supported yet.`,
      );
    }
    if (!LAYER_TYPES.has(layer.mediaType)) {
      throw new ImageError(
        'unsupported',
        `${what} has a layer of unknown type "${layer.mediaType}".`,
      );
    }
    assertSha256(layer.digest, `A layer of ${what}`);
  }
  return { kind, mediaType, manifest: m };
}
