/**
 * Moving object bytes between this machine and the S3 gateway through presigned URLs.
 * Both directions stream, so an object of any size costs a few chunks of memory, and a
 * download only takes its final name once every byte is on disk.
 */
import type { Presigned } from './buckets-types.js';
import { ApiCallError, CliError, NetworkError } from './errors.js';
import {
  counted,
  emptyBody,
  putStream,
  toFile,
  toStdout,
  type Source,
  type StreamingRequestInit,
} from './byte-streams.js';
import { Progress } from './progress.js';

export { openSource, type Source } from './byte-streams.js';

/** How a transfer shows its progress. */
export interface MeterOptions {
  label: string;
  show: boolean;
}

/** PUTs `source` to a presigned URL; answers the number of bytes sent. */
export async function upload(
  target: Presigned,
  source: Source,
  meter: MeterOptions,
): Promise<number> {
  const progress = new Progress({ label: meter.label, total: source.size, enabled: meter.show });
  const headers: Record<string, string> = { ...target.requiredHeaders };
  // S3 refuses a PUT without a length; only stdin, whose length nobody knows, goes
  // chunked, which pier's own gateway accepts.
  await putStream(gatewayFetch, target.url, headers, source, progress, gatewayError);
  return progress.bytes;
}

/**
 * GETs a presigned URL into `dest` (a file path, or `-` for stdout); answers the number
 * of bytes received. Nothing is written unless the gateway answers 2xx.
 */
export async function download(url: string, dest: string, meter: MeterOptions): Promise<number> {
  const res = await gatewayFetch(url, { method: 'GET' });
  if (!res.ok) throw await gatewayError(res);
  const length = res.headers.get('content-length');
  const total = length === null ? undefined : Number(length);
  const progress = new Progress({ label: meter.label, total, enabled: meter.show });
  const chunks = counted(res.body ?? emptyBody(), progress);
  // A connection cut at the wrong moment can look like a clean end of a shorter body.
  const checkComplete = () => {
    if (total !== undefined && progress.bytes !== total) {
      throw new NetworkError(`the download ended early: ${progress.bytes} of ${total} bytes`);
    }
  };
  try {
    if (dest === '-') await toStdout(chunks);
    else await toFile(chunks, dest, checkComplete);
  } catch (err) {
    progress.abort();
    throw transferError(err, dest);
  }
  progress.finish();
  return progress.bytes;
}

/**
 * Turns a gateway error answer (S3 XML: `<Error><Code>…</Code><Message>…</Message>`) into
 * an `ApiCallError`, which prints as `pier: <Message> (<Code>)`.
 */
export async function gatewayError(res: Response): Promise<ApiCallError> {
  const text = await res.text().catch(() => '');
  const code = xmlText(text, 'Code');
  const fallback = `the gateway answered HTTP ${res.status}`;
  if (code) return new ApiCallError(res.status, code, xmlText(text, 'Message') ?? fallback);
  return new ApiCallError(res.status, `http-${res.status}`, fallback);
}

/** fetch, with a refused or broken connection reported the way the API client does. */
async function gatewayFetch(url: string, init: StreamingRequestInit): Promise<Response> {
  try {
    return await fetch(url, init);
  } catch (err) {
    throw new NetworkError(`cannot reach ${new URL(url).origin}: ${reasonOf(err)}`);
  }
}

/** Local file errors name the file; anything else broke on the network side. */
function transferError(err: unknown, dest: string): unknown {
  if (err instanceof CliError || err instanceof ApiCallError || err instanceof NetworkError) {
    return err;
  }
  const e = err as NodeJS.ErrnoException;
  if (typeof e.syscall === 'string') return new CliError(`cannot write ${dest}: ${e.code}`);
  return new NetworkError(`the download broke off: ${reasonOf(err)}`);
}

/**
 * fetch hides the useful part in `cause`: system codes (ECONNREFUSED, ENOTFOUND) say it
 * best, undici's own codes (UND_ERR_SOCKET) less well than its message ("other side closed").
 */
function reasonOf(err: unknown): string {
  const cause = (err as { cause?: { code?: unknown; message?: unknown } }).cause;
  if (typeof cause?.code === 'string' && !cause.code.startsWith('UND_ERR')) return cause.code;
  if (typeof cause?.message === 'string') return cause.message;
  return err instanceof Error ? err.message : String(err);
}

const XML_ENTITIES: Record<string, string> = {
  amp: '&',
  lt: '<',
  gt: '>',
  quot: '"',
  apos: "'",
};

/** The text of the first `<tag>` element; enough for S3's flat error documents. */
function xmlText(xml: string, tag: string): string | undefined {
  const m = new RegExp(`<${tag}>([^<]*)</${tag}>`).exec(xml);
  if (!m) return undefined;
  return (m[1] ?? '').replace(/&(#x[0-9a-f]+|#\d+|\w+);/gi, (all, name: string) => {
    if (name.startsWith('#x') || name.startsWith('#X')) {
      return String.fromCodePoint(parseInt(name.slice(2), 16));
    }
    if (name.startsWith('#')) return String.fromCodePoint(parseInt(name.slice(1), 10));
    return XML_ENTITIES[name] ?? all;
  });
}
