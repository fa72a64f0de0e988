/**
 * The one error type of image pulls. Its `code` is a closed set that callers (the machine
 * service, the API's error renderer) branch on; the message is a sentence meant for the
 * person who asked for the image, so it names the reference or digest involved.
 */

/**
 * Why a pull failed:
 * - `bad-reference`: the reference string is not a valid image reference.
 * - `not-found`: the registry has no such repository, tag or digest.
 * - `unauthorized`: the registry (or its token service) refused our credentials, or we have none.
 * - `unreachable`: DNS, connection, timeout, 429 or 5xx: trying again later may work.
 * - `digest-mismatch`: bytes did not hash to the digest (or size) that named them.
 * - `refused`: the registry, its token realm or a redirect resolves to an address pier may
 *   not reach for a customer (loopback, private, link-local, metadata: the outbound guard);
 *   an operator can allow it (PIER_ALLOW_PRIVATE_TARGETS=1, PIER_TRUSTED_REGISTRIES).
 * - `unsupported`: schema 1, an unknown media type, no manifest for this platform, zstd
 *   layers, or a layer that tries to write outside its root.
 * - `too-large`: the image passes one of this host's caps on an image (limits.ts): its
 *   compressed download, its unpacked bytes or its number of entries. The message names
 *   the cap and the operator's setting.
 */
export type ImageErrorCode =
  | 'bad-reference'
  | 'not-found'
  | 'unauthorized'
  | 'unreachable'
  | 'digest-mismatch'
  | 'refused'
  | 'unsupported'
  | 'too-large';

/** An image pull failure with a closed `code` and a human sentence as its message. */
export class ImageError extends Error {
  override readonly name = 'ImageError';

  constructor(
    readonly code: ImageErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}
