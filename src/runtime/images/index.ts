/**
 * OCI images for machines: pull from a registry (HTTP API v2, token auth), verify every
 * byte against its digest, and keep one unpacked root per image on disk.
 *
 * How it fits together:
 * - reference.ts parses references (Docker Hub defaults); registry-client.ts speaks the
 *   API over http.ts (every hop through the outbound guard the store is given,
 *   loopback-only plain HTTP, same-scheme redirects, idle timeouts) and
 *   auth.ts (Bearer/Basic challenges); manifest.ts and platform.ts read manifests and pick
 *   this host's image from an index.
 * - blob-cache.ts keeps verified blobs by digest; image-builder.ts downloads and unpacks;
 *   roots.ts puts a root in place atomically; records.ts remembers pulled images.
 * - Unpacking: node-tar's Parser reads the archive format (tar-entries.ts); our own
 *   sequential applier (unpack-layer.ts) does OCI whiteouts and path confinement
 *   (confine.ts), because node-tar's Unpack knows no whiteouts and its concurrent,
 *   separately patched symlink defences are harder to trust than one small resolver.
 *
 * - limits.ts holds each image to the host's caps (download, unpacked bytes, entries),
 *   charged while blobs and layers stream.
 *
 * Errors are ImageError with a closed `code`; a caller's abort rejects with its reason.
 */
export {
  ImageStore,
  type ImageStoreOptions,
  type PullOptions,
  type PulledImage,
} from './image-store.js';
export type { ImageConfig } from './image-config.js';
export type { BlobProgress } from './blob-cache.js';
export type { Credentials } from './auth.js';
export { ImageError, type ImageErrorCode } from './errors.js';
export { DEFAULT_IMAGE_LIMITS, type ImageLimits } from './limits.js';
export { parseReference, formatReference, type ImageReference } from './reference.js';
export { hostPlatform } from './platform.js';
