/** Gzip'd tar archives of source trees for build tests, and their upload. */
import { gzipSync } from 'node:zlib';
import { tarLayer, type LayerEntry } from '../../src/runtime/images/build.test-helper.js';

/** A gzip'd tar of `entries`; a plain object is a tree of files (path -> content). */
export function sourceArchive(entries: LayerEntry[] | Record<string, string>): Buffer {
  const list = Array.isArray(entries)
    ? entries
    : Object.entries(entries).map(([path, content]) => ({ path, content }));
  return gzipSync(tarLayer(list));
}

/** POSTs `bytes` as an app's source; answers status and parsed body. */
export async function uploadSource(
  base: string,
  token: string,
  app: string,
  bytes: Buffer,
): Promise<{ status: number; body: any }> {
  const res = await fetch(`${base}/v1/apps/${app}/sources`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/gzip' },
    body: new Uint8Array(bytes),
  });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON
  }
  return { status: res.status, body };
}
