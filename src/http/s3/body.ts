/**
 * Request bodies at the gateway: the raw stream passes through the SigV4 body verifier
 * (signed SHA-256, aws-chunked signatures, x-amz-checksum-*), which fails before the end
 * of a body that is not what was signed, so the blob store never commits one.
 */
import type { FastifyRequest } from 'fastify';
import type { Readable } from 'node:stream';
import { ObjectError } from '../../services/buckets/object-error.js';
import { MAX_PUT_BYTES, type PutOptions } from '../../services/buckets/objects.js';
import {
  claimedChecksums,
  checksumField,
  createBodyVerifier,
  type VerifiedAuth,
} from '../../objects/sigv4/index.js';

export interface RequestBody {
  stream: Readable;
  put: PutOptions;
  /** The verified x-amz-checksum-* values, echoed in the answer as S3 does. */
  checksumHeaders(): Record<string, string>;
}

function contentMd5(req: FastifyRequest): Buffer | undefined {
  const h = req.headers['content-md5'];
  if (typeof h !== 'string') return undefined;
  const md5 = Buffer.from(h, 'base64');
  if (md5.length !== 16 || md5.toString('base64') !== h.trim()) {
    throw new ObjectError('InvalidArgument', 'The Content-MD5 you specified is not valid.');
  }
  return md5;
}

export function requestBody(req: FastifyRequest, auth: VerifiedAuth): RequestBody {
  const md5 = contentMd5(req);
  const chunked =
    auth.payload.kind === 'streaming-signed' || auth.payload.kind === 'streaming-unsigned-trailer';
  const length = req.headers['content-length'];
  // Refuse what is too large before reading it, so the client gets an S3 error, not a reset.
  const declared = Number(chunked ? req.headers['x-amz-decoded-content-length'] : length);
  if (Number.isFinite(declared) && declared > MAX_PUT_BYTES) {
    throw new ObjectError(
      'EntityTooLarge',
      'Your proposed upload exceeds the maximum allowed size.',
      {
        ProposedSize: String(declared),
        MaxSizeAllowed: String(MAX_PUT_BYTES),
      },
    );
  }
  const verifier = createBodyVerifier(auth, req.headers);
  const raw = req.raw;
  // The verifier can fail before its consumer attaches (a small body arrives whole while the
  // blob store opens its file): without a listener that would be an uncaught 'error' and end
  // the process. The consumer still sees the failure, as the stream stays errored.
  verifier.on('error', () => {});
  raw.on('error', (err) => verifier.destroy(err));
  raw.on('close', () => {
    if (!raw.complete)
      verifier.destroy(new ObjectError('IncompleteBody', 'The request body ended early.'));
  });
  raw.pipe(verifier);
  const claimed = claimedChecksums(req.headers);
  return {
    stream: verifier,
    put: {
      md5,
      // aws-chunked bodies are checked against x-amz-decoded-content-length by the decoder.
      size: !chunked && typeof length === 'string' ? Number(length) : undefined,
    },
    checksumHeaders: () =>
      Object.fromEntries(
        [...claimed].map(([algorithm, value]) => [checksumField(algorithm), value]),
      ),
  };
}

/** A small XML body (DeleteObjects, CompleteMultipartUpload), verified like any other. */
export async function readSmallBody(
  req: FastifyRequest,
  auth: VerifiedAuth,
  maxBytes: number,
): Promise<string> {
  const { stream } = requestBody(req, auth);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of stream) {
    size += (chunk as Buffer).length;
    if (size > maxBytes) throw new ObjectError('MalformedXML', 'The XML body is too large.');
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}
