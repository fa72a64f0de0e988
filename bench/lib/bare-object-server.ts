/**
 * The bare-HTTP reference of the object benchmarks: a plain node:http server that does with
 * a request body what pier's file store does, minus everything S3 adds (signatures, hashing,
 * metadata rows): PUT /name streams the body into a file, fsyncs it and answers 200; GET
 * /name streams the file back. It measures what any Node HTTP server can move on this
 * machine, so that pier ÷ bare shows the gateway's own cost and pier ÷ disk what is left.
 *
 * GET /name?from=memory answers the file's bytes from memory in one write (read once per
 * size: every object of one size in a benchmark holds the same bytes). No server moves bytes
 * faster than that over loopback to the same client, so it is the ceiling of every GET
 * figure, pier's and the bare server's alike.
 */
import { open, readFile, stat } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';

/** Same chunk size as pier's file store. */
const IO_CHUNK = 128 * 1024;

export interface BareObjectServer {
  url: string;
  close(): Promise<void>;
}

/** The bytes answered from memory, by object size. */
type MemoryCopies = Map<number, Buffer>;

async function handle(
  dir: string,
  copies: MemoryCopies,
  req: http.IncomingMessage,
  res: http.ServerResponse,
) {
  const url = new URL(req.url ?? '/', 'http://x');
  const name = path.basename(decodeURIComponent(url.pathname));
  const file = path.join(dir, name);
  if (req.method === 'PUT') {
    const handle = await open(file, 'w', 0o600);
    await pipeline(req, handle.createWriteStream({ highWaterMark: IO_CHUNK, flush: true }));
    res.writeHead(200, { 'content-length': 0 }).end();
    return;
  }
  if (url.searchParams.get('from') === 'memory') {
    const { size } = await stat(file);
    let bytes = copies.get(size);
    if (!bytes) copies.set(size, (bytes = await readFile(file)));
    res.writeHead(200, { 'content-length': size }).end(bytes);
    return;
  }
  const handle = await open(file, 'r');
  const { size } = await handle.stat();
  res.writeHead(200, { 'content-length': size });
  await pipeline(handle.createReadStream({ highWaterMark: IO_CHUNK }), res);
}

/** Starts the server on a loopback port, storing files in `dir`. */
export async function startBareObjectServer(dir: string): Promise<BareObjectServer> {
  const copies: MemoryCopies = new Map();
  const server = http.createServer({ keepAliveTimeout: 60_000 }, (req, res) => {
    handle(dir, copies, req, res).catch((err: unknown) => {
      if (!res.headersSent) res.writeHead(500).end(String(err));
      else res.destroy();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/`,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
