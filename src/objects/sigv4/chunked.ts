/**
 * Decodes `Content-Encoding: aws-chunked` bodies while they stream:
 *
 *     <hex size>;chunk-signature=<sig>\r\n<data>\r\n … 0;chunk-signature=<sig>\r\n[trailers]\r\n
 *
 * (`<hex size>\r\n` without signatures for `STREAMING-UNSIGNED-PAYLOAD-TRAILER`). Each signed
 * chunk is held until its signature checks out, so nothing unauthenticated is passed on and
 * no more than one chunk is ever buffered. Trailers (e.g. `x-amz-checksum-crc32`) are verified
 * before the stream ends and then exposed for the caller.
 */
import { createHash, timingSafeEqual, type Hash } from 'node:crypto';
import { Transform, type TransformCallback } from 'node:stream';
import { EMPTY_SHA256, sha256Hex, signatureHex } from './canonical.js';
import {
  Checksummer,
  checksumAlgorithmOf,
  claimedChecksums,
  verifyChecksums,
  type ChecksumAlgorithm,
} from './checksum.js';
import { SigV4Error } from './errors.js';
import type { HeaderBag, StreamingPayloadAuth } from './types.js';

/** The default and usual upper bound of one chunk; SDKs send 64 KiB to 8 MiB. */
export const DEFAULT_MAX_CHUNK_SIZE = 16 * 1024 * 1024;
/** A chunk header is a size and a signature; anything longer is not a chunk header. */
const MAX_LINE = 4096;
/** Trailers are a checksum and a signature; this leaves room for a few more. */
const MAX_TRAILER_SECTION = 16 * 1024;

/** Options of {@link decodeAwsChunked}. */
export interface AwsChunkedOptions {
  /** The payload of the verified request; must be one of the streaming kinds. */
  payload: StreamingPayloadAuth;
  /** `x-amz-decoded-content-length`, when the client sent it: the data must be this long. */
  decodedContentLength?: number;
  /**
   * Trailer names from the `x-amz-trailer` header. Checksum trailers must be declared there,
   * since the checksum has to be computed while the data streams past.
   */
  declaredTrailers?: readonly string[];
  /**
   * The request headers, when a checksum came as an `x-amz-checksum-*` header rather than a
   * trailer: it is then checked against the decoded data.
   */
  checksumHeaders?: HeaderBag;
  /** The largest chunk accepted, in bytes (default 16 MiB). */
  maxChunkSize?: number;
}

/** What a fully decoded body ended with. */
export interface AwsChunkedResult {
  /** Trailer fields by lowercased name, without `x-amz-trailer-signature`. */
  trailers: Record<string, string>;
  /** Number of data bytes emitted. */
  decodedLength: number;
}

type State = 'size' | 'data' | 'data-crlf' | 'trailer' | 'done';

function sameHex(a: string, b: string): boolean {
  const x = Buffer.from(a, 'latin1');
  const y = Buffer.from(b.toLowerCase(), 'latin1');
  return x.length === y.length && timingSafeEqual(x, y);
}

/**
 * A Transform from an aws-chunked body to its data bytes. It fails with a {@link SigV4Error}:
 * `SignatureDoesNotMatch` (chunk or trailer signature), `IncompleteBody` (body cut short, or
 * not `x-amz-decoded-content-length` long), `BadDigest` (checksum trailer mismatch) or
 * `InvalidRequest` (malformed framing).
 */
export class AwsChunkedDecoder extends Transform {
  /** The trailers, once the body has been decoded completely; undefined before. */
  trailers: Record<string, string> | undefined;
  /** Settles when the body is decoded and verified, or fails. Never an unhandled rejection. */
  readonly done: Promise<AwsChunkedResult>;

  private readonly payload: StreamingPayloadAuth;
  private readonly decodedContentLength: number | undefined;
  private readonly declared: Set<string>;
  private readonly maxChunkSize: number;
  private readonly checksumHeaders: HeaderBag;
  private readonly checksums: Checksummer;

  private state: State = 'size';
  private line: Buffer[] = [];
  private lineLength = 0;
  private trailerBytes = 0;
  private remaining = 0;
  private crlfSeen = 0;
  private total = 0;
  private previousSignature: string;
  private chunkSignature = '';
  private chunkHash: Hash | undefined;
  private held: Buffer[] = [];
  private readonly received: Record<string, string> = {};
  private canonicalTrailer = '';
  private trailerSignature: string | undefined;
  private settle!: { resolve: (r: AwsChunkedResult) => void; reject: (e: Error) => void };

  constructor(opts: AwsChunkedOptions) {
    super();
    this.payload = opts.payload;
    this.decodedContentLength = opts.decodedContentLength;
    this.maxChunkSize = opts.maxChunkSize ?? DEFAULT_MAX_CHUNK_SIZE;
    this.declared = new Set((opts.declaredTrailers ?? []).map((n) => n.trim().toLowerCase()));
    this.checksumHeaders = opts.checksumHeaders ?? {};
    const algorithms = new Set<ChecksumAlgorithm>(claimedChecksums(this.checksumHeaders).keys());
    for (const name of this.declared) {
      const algorithm = checksumAlgorithmOf(name);
      if (algorithm) algorithms.add(algorithm);
    }
    this.checksums = new Checksummer(algorithms);
    this.previousSignature =
      opts.payload.kind === 'streaming-signed' ? opts.payload.seedSignature : '';
    this.done = new Promise<AwsChunkedResult>((resolve, reject) => {
      this.settle = { resolve, reject };
    });
    // Callers that only watch the stream's 'error' need not also handle this promise.
    this.done.catch(() => undefined);
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    try {
      this.consume(chunk);
      callback();
    } catch (err) {
      callback(err as Error);
    }
  }

  override _flush(callback: TransformCallback): void {
    try {
      // The AWS SDK for JavaScript ends an unsigned-trailer body without a checksum at `0\r\n`,
      // leaving out the blank line; nothing is lost, so that end is accepted. Signed bodies
      // come from signers that always write it.
      const lenientEnd =
        this.state === 'trailer' &&
        this.lineLength === 0 &&
        this.trailerBytes === 0 &&
        this.payload.kind === 'streaming-unsigned-trailer';
      if (lenientEnd) this.finish();
      if (this.state !== 'done') {
        throw new SigV4Error(
          'IncompleteBody',
          'The aws-chunked body ended before its final chunk.',
        );
      }
      callback();
    } catch (err) {
      callback(err as Error);
    }
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.settle.reject(
      error ?? new SigV4Error('IncompleteBody', 'The body was not read to its end.'),
    );
    callback(error);
  }

  private get signed(): boolean {
    return this.payload.kind === 'streaming-signed';
  }

  private consume(chunk: Buffer): void {
    let pos = 0;
    while (pos < chunk.length) {
      switch (this.state) {
        case 'size':
        case 'trailer': {
          const newline = chunk.indexOf(0x0a, pos);
          const end = newline < 0 ? chunk.length : newline + 1;
          this.appendLine(chunk.subarray(pos, end));
          pos = end;
          if (newline >= 0) this.endLine();
          break;
        }
        case 'data': {
          const n = Math.min(this.remaining, chunk.length - pos);
          this.data(chunk.subarray(pos, pos + n));
          pos += n;
          this.remaining -= n;
          if (this.remaining === 0) this.endChunkData();
          break;
        }
        case 'data-crlf': {
          const expected = this.crlfSeen === 0 ? 0x0d : 0x0a;
          if (chunk[pos] !== expected) throw this.malformed('chunk data is not followed by CRLF');
          pos++;
          if (++this.crlfSeen === 2) this.state = 'size';
          break;
        }
        case 'done':
          throw this.malformed('data follows the final chunk');
      }
    }
  }

  private malformed(what: string): SigV4Error {
    return new SigV4Error('InvalidRequest', `Malformed aws-chunked body: ${what}.`);
  }

  private appendLine(piece: Buffer): void {
    this.lineLength += piece.length;
    if (this.state === 'trailer') this.trailerBytes += piece.length;
    if (this.lineLength > MAX_LINE || this.trailerBytes > MAX_TRAILER_SECTION) {
      throw this.malformed(this.state === 'size' ? 'chunk header too long' : 'trailers too long');
    }
    this.line.push(piece);
  }

  private endLine(): void {
    const raw = Buffer.concat(this.line, this.lineLength).toString('latin1');
    this.line = [];
    this.lineLength = 0;
    if (!raw.endsWith('\r\n')) throw this.malformed('line not terminated by CRLF');
    const text = raw.slice(0, -2);
    if (this.state === 'size') this.chunkHeader(text);
    else this.trailerLine(text);
  }

  /** `<hex size>[;chunk-signature=<sig>]`. */
  private chunkHeader(text: string): void {
    const [sizeHex = '', ...extensions] = text.split(';');
    if (!/^[0-9a-fA-F]{1,16}$/.test(sizeHex)) throw this.malformed(`bad chunk size "${sizeHex}"`);
    const size = parseInt(sizeHex, 16);
    if (size > this.maxChunkSize) {
      throw new SigV4Error(
        'InvalidRequest',
        `Chunk size ${size} exceeds the maximum of ${this.maxChunkSize} bytes.`,
      );
    }
    if (this.signed) {
      const signature = extensions
        .map((e) => /^chunk-signature=([0-9a-fA-F]{64})$/.exec(e.trim())?.[1])
        .find((s) => s !== undefined);
      if (!signature) throw this.malformed('chunk without chunk-signature');
      this.chunkSignature = signature;
      this.chunkHash = createHash('sha256');
    }
    if (size === 0) {
      this.verifyChunk(EMPTY_SHA256);
      this.state = 'trailer';
      return;
    }
    this.remaining = size;
    this.state = 'data';
  }

  private data(piece: Buffer): void {
    this.total += piece.length;
    if (this.decodedContentLength !== undefined && this.total > this.decodedContentLength) {
      throw new SigV4Error(
        'IncompleteBody',
        'The decoded body is longer than x-amz-decoded-content-length.',
      );
    }
    this.checksums.update(piece);
    if (this.chunkHash) {
      this.chunkHash.update(piece);
      // Copied: the writer may reuse its buffer once this call returns, and the data must wait
      // for the chunk's signature.
      this.held.push(Buffer.from(piece));
    } else {
      this.push(piece);
    }
  }

  private endChunkData(): void {
    if (this.chunkHash) {
      this.verifyChunk(this.chunkHash.digest('hex'));
      for (const piece of this.held) this.push(piece);
      this.held = [];
    }
    this.state = 'data-crlf';
    this.crlfSeen = 0;
  }

  private verifyChunk(dataHash: string): void {
    if (this.payload.kind !== 'streaming-signed') return;
    const toSign = [
      'AWS4-HMAC-SHA256-PAYLOAD',
      this.payload.datetime,
      this.payload.scope,
      this.previousSignature,
      EMPTY_SHA256,
      dataHash,
    ].join('\n');
    const expected = signatureHex(this.payload.signingKey, toSign);
    if (!sameHex(expected, this.chunkSignature)) {
      throw new SigV4Error('SignatureDoesNotMatch', undefined, {
        StringToSign: toSign,
        SignatureProvided: this.chunkSignature,
      });
    }
    this.previousSignature = expected;
    this.chunkHash = undefined;
  }

  /** `name:value`, or the blank line that ends the body. */
  private trailerLine(text: string): void {
    if (text === '') {
      this.finish();
      return;
    }
    const colon = text.indexOf(':');
    if (colon <= 0) throw this.malformed('bad trailer line');
    const name = text.slice(0, colon).trim().toLowerCase();
    const value = text.slice(colon + 1).trim();
    if (name === 'x-amz-trailer-signature') {
      if (this.trailerSignature !== undefined) throw this.malformed('two trailer signatures');
      this.trailerSignature = value;
      return;
    }
    if (this.payload.kind === 'streaming-signed' && !this.payload.trailer) {
      throw this.malformed('trailers sent without a -TRAILER payload');
    }
    if (name in this.received) throw this.malformed(`trailer ${name} sent twice`);
    if (checksumAlgorithmOf(name) && !this.declared.has(name)) {
      throw new SigV4Error(
        'InvalidRequest',
        `The trailer ${name} was not declared in x-amz-trailer.`,
      );
    }
    this.received[name] = value;
    this.canonicalTrailer += `${name}:${value}\n`;
  }

  private finish(): void {
    const payload = this.payload;
    if (payload.kind === 'streaming-signed' && payload.trailer) {
      const toSign = [
        'AWS4-HMAC-SHA256-TRAILER',
        payload.datetime,
        payload.scope,
        this.previousSignature,
        sha256Hex(this.canonicalTrailer),
      ].join('\n');
      const provided = this.trailerSignature ?? '';
      if (!sameHex(signatureHex(payload.signingKey, toSign), provided)) {
        throw new SigV4Error('SignatureDoesNotMatch', undefined, {
          StringToSign: toSign,
          SignatureProvided: provided,
        });
      }
    } else if (this.trailerSignature !== undefined) {
      throw this.malformed('trailer signature on a payload without signed trailers');
    }
    for (const name of this.declared) {
      if (!(name in this.received)) {
        throw new SigV4Error('InvalidRequest', `The declared trailer ${name} was not sent.`);
      }
    }
    verifyChecksums(this.received, this.checksums);
    verifyChecksums(this.checksumHeaders, this.checksums);
    if (this.decodedContentLength !== undefined && this.total !== this.decodedContentLength) {
      throw new SigV4Error(
        'IncompleteBody',
        `The decoded body is ${this.total} bytes; x-amz-decoded-content-length says ${this.decodedContentLength}.`,
      );
    }
    this.state = 'done';
    this.trailers = { ...this.received };
    this.settle.resolve({ trailers: this.trailers, decodedLength: this.total });
  }
}

/** Creates an {@link AwsChunkedDecoder}: pipe the raw request body through it. */
export function decodeAwsChunked(opts: AwsChunkedOptions): AwsChunkedDecoder {
  return new AwsChunkedDecoder(opts);
}
