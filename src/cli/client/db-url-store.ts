/**
 * Connection URLs the person chose to keep (`--save`), in `databases.json` beside the
 * config file. The API shows a URL once and never again, so this file is the only copy
 * the CLI has: it is written 0600 like the config file, and keyed by API address as well
 * as name, because two pier installations can each have a database called `main`.
 */
import path from 'node:path';
import { configPath } from './config-file.js';
import { isRecord, readJsonObject, writePrivateJson } from './private-json.js';

/** API address → database name → URL. */
type SavedUrls = Record<string, Record<string, string>>;

/** `databases.json` in the directory of the config file (so `PIER_CONFIG` moves both). */
export function urlStorePath(env: Record<string, string | undefined> = process.env): string {
  return path.join(path.dirname(configPath(env)), 'databases.json');
}

/** The saved URL of `name` on the API at `apiUrl`, if one was saved. */
export async function savedUrl(
  apiUrl: string,
  name: string,
  file: string = urlStorePath(),
): Promise<string | undefined> {
  return (await readStore(file))[apiUrl]?.[name];
}

/** Saves (or replaces) the URL of `name` on `apiUrl`; answers the file it went to. */
export async function saveUrl(
  apiUrl: string,
  name: string,
  url: string,
  file: string = urlStorePath(),
): Promise<string> {
  const store = await readStore(file);
  store[apiUrl] = { ...store[apiUrl], [name]: url };
  await writeStore(store, file);
  return file;
}

/** Drops the URL of `name` on `apiUrl` (the database is gone); answers whether one was saved. */
export async function forgetUrl(
  apiUrl: string,
  name: string,
  file: string = urlStorePath(),
): Promise<boolean> {
  const store = await readStore(file);
  const urls = store[apiUrl];
  if (!urls || !(name in urls)) return false;
  delete urls[name];
  if (Object.keys(urls).length === 0) delete store[apiUrl];
  await writeStore(store, file);
  return true;
}

/** Reads the store; a missing file is empty, a broken one is an error (never overwritten). */
async function readStore(file: string): Promise<SavedUrls> {
  const store: SavedUrls = {};
  for (const [api, urls] of Object.entries(await readJsonObject(file))) {
    if (!isRecord(urls)) continue;
    store[api] = Object.fromEntries(
      Object.entries(urls).filter((e): e is [string, string] => typeof e[1] === 'string'),
    );
  }
  return store;
}

/** Writes the store 0600, atomically: the URLs carry passwords. */
async function writeStore(store: SavedUrls, file: string): Promise<void> {
  await writePrivateJson(file, store);
}
