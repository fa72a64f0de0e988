/**
 * A small fake registry for tests (http.createServer speaking the parts of the v2 protocol
 * a pull uses): it serves a built image as `app:1`, and a handler may answer any request
 * first, to misbehave on purpose. Every request is recorded.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { BuiltImage } from './build.test-helper.js';

/** Answers a request itself (returns true) or lets the fake answer it. */
export type Handler = (req: http.IncomingMessage, res: http.ServerResponse) => boolean | void;

/** A running fake registry. */
export interface Fake {
  host: string;
  url: string;
  requests: { method: string; path: string; authorization?: string }[];
  close(): Promise<void>;
}

/** Serves `image` as `app:1`; `handler` may answer a request first (return true). */
export async function fakeRegistry(
  image: BuiltImage | undefined,
  handler?: Handler,
): Promise<Fake> {
  const requests: Fake['requests'] = [];
  const server = http.createServer((req, res) => {
    const p = new URL(req.url ?? '/', 'http://x').pathname;
    requests.push({
      method: req.method ?? '',
      path: p,
      ...(req.headers.authorization ? { authorization: req.headers.authorization } : {}),
    });
    if (handler?.(req, res)) return;
    const m = /^\/v2\/app\/(manifests|blobs)\/(.+)$/.exec(p);
    if (image && m?.[1] === 'manifests') {
      const doc =
        m[2] === '1' || m[2] === image.top.digest
          ? image.top
          : image.manifests.find((d) => d.digest === m[2]);
      if (doc) {
        res.writeHead(200, { 'content-type': doc.mediaType, 'docker-content-digest': doc.digest });
        res.end(req.method === 'HEAD' ? undefined : doc.body);
        return;
      }
    }
    if (image && m?.[1] === 'blobs' && image.blobs.has(m[2]!)) {
      res
        .writeHead(200, { 'content-type': 'application/octet-stream' })
        .end(image.blobs.get(m[2]!));
      return;
    }
    res.writeHead(404, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        errors: [{ code: m?.[1] === 'blobs' ? 'BLOB_UNKNOWN' : 'MANIFEST_UNKNOWN' }],
      }),
    );
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const host = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    host,
    url: `http://${host}`,
    requests,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
