/**
 * Moving bytes between local files (or stdin/stdout) and HTTP bodies for the CLI's
 * transfers (`pier buckets cp`, `pier machines cp`): streamed a chunk at a time with
 * progress, and downloads that never leave a half file under the name asked for.
 */
import { randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream, unlinkSync } from 'node:fs';
import { rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { CliError } from './errors.js';
import type { Progress } from './progress.js';

/** Where an upload's bytes come from. */
export interface Source {
  stream: Readable;
  /** Unknown for stdin. */
  size?: number;
}

/** Opens a local file for upload, or stdin for `-`. */
export async function openSource(file: string): Promise<Source> {
  if (file === '-') {
    if (process.stdin.isTTY)
      process.stderr.write('Reading the object from stdin; end with Ctrl-D.\n');
    return { stream: process.stdin };
  }
  const info = await stat(file).catch((err: NodeJS.ErrnoException) => {
    throw new CliError(`cannot read ${file}: ${err.code ?? err.message}`);
  });
  if (!info.isFile()) throw new CliError(`${file} is not a file`);
  return { stream: createReadStream(file), size: info.size };
}

/**
 * A web stream pulling from a Node stream one chunk at a time. Readable.toWeb would do,
 * but on Node 20 it counts chunks rather than bytes against its high-water mark and can
 * read far ahead of the network; pulling keeps at most a chunk or two in memory.
 */
export function webStream(source: Readable, progress: Progress): ReadableStream<Uint8Array> {
  const chunks = source[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      const next = await chunks.next();
      if (next.done) return controller.close();
      progress.add(next.value.byteLength);
      controller.enqueue(next.value);
    },
    async cancel() {
      // Ending the iterator destroys the file stream and closes its descriptor.
      await chunks.return?.();
    },
  });
}

export async function* counted(
  body: AsyncIterable<Uint8Array>,
  progress: Progress,
): AsyncGenerator<Uint8Array> {
  for await (const chunk of body) {
    progress.add(chunk.byteLength);
    yield chunk;
  }
}

export async function* emptyBody(): AsyncGenerator<Uint8Array> {}

export async function toStdout(chunks: AsyncIterable<Uint8Array>): Promise<void> {
  try {
    await pipeline(chunks, process.stdout);
  } catch (err) {
    // The reader went away (`| head`): what it wanted it has, which is not a failure.
    if ((err as NodeJS.ErrnoException).code !== 'EPIPE') throw err;
  }
}

/**
 * Writes to a temporary file beside the target and renames it at the end, so a failed
 * or interrupted download never leaves a half file under the name asked for.
 */
export async function toFile(
  chunks: AsyncIterable<Uint8Array>,
  target: string,
  check: () => void,
): Promise<void> {
  const tmp = path.join(
    path.dirname(target),
    `.${path.basename(target)}.${randomBytes(4).toString('hex')}.pier-part`,
  );
  // A listener replaces the default exit on these signals, so it must exit itself.
  const onSignal = (signal: NodeJS.Signals) => {
    try {
      unlinkSync(tmp);
    } catch {
      // Not created yet, or already gone: nothing to clean.
    }
    process.exit(signal === 'SIGINT' ? 130 : 143);
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    await pipeline(chunks, createWriteStream(tmp, { flags: 'wx' }));
    check();
    await rename(tmp, target);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}

/**
 * Node's fetch needs `duplex: 'half'` to send a stream body, but the RequestInit type in
 * scope (the DOM one, which a dependency's types pull in) does not declare the field.
 */
export type StreamingRequestInit = RequestInit & { duplex?: 'half' };

/**
 * PUTs `source` to `url` through `send`, streamed and counted by `progress`; a refused
 * answer becomes `errorOf(res)`. A length is sent when known: only stdin goes chunked.
 */
export async function putStream(
  send: (url: string, init: StreamingRequestInit) => Promise<Response>,
  url: string,
  headers: Record<string, string>,
  source: Source,
  progress: Progress,
  errorOf: (res: Response) => Promise<Error>,
): Promise<void> {
  const res = await sendStream(send, 'PUT', url, headers, source, progress, errorOf);
  await res.body?.cancel();
}

/**
 * Sends `source` as the body of a `method` request (see `putStream`); answers the 2xx
 * response with its body unread, the meter finished.
 */
export async function sendStream(
  send: (url: string, init: StreamingRequestInit) => Promise<Response>,
  method: string,
  url: string,
  headers: Record<string, string>,
  source: Source,
  progress: Progress,
  errorOf: (res: Response) => Promise<Error>,
): Promise<Response> {
  if (source.size !== undefined) headers['content-length'] = String(source.size);
  const res = await send(url, {
    method,
    headers,
    body: webStream(source.stream, progress),
    duplex: 'half',
    // Allowing redirects makes Node's fetch keep every chunk sent, to replay the body
    // (the whole file in memory); neither a presigned URL nor the API redirects.
    redirect: 'error',
  }).catch((err: unknown) => {
    progress.abort();
    throw err;
  });
  if (!res.ok) {
    progress.abort();
    throw await errorOf(res);
  }
  progress.finish();
  return res;
}
