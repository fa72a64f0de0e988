/**
 * Connection URLs the person chose to keep (`--save`), in `databases.json` beside the
 * config file. The API shows a URL once and never again, so this file is the only copy
 * the CLI has: it is written 0600 like the config file, and keyed by API address as well
 * as name, because two pier installations can each have a database called `main`.
 */
import { randomBytes } from 'node:crypto';
import { chmod, mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { configPath } from './config-file.js';
import { CliError } from './errors.js';

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
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return {};
    throw new CliError(`cannot read ${file}: ${(err as Error).message}`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    // Rewriting a file we cannot read would lose URLs that exist nowhere else.
    throw new CliError(`${file} is not valid JSON; fix or move it away`);
  }
  const store: SavedUrls = {};
  if (!isRecord(parsed)) throw new CliError(`${file} must hold a JSON object`);
  for (const [api, urls] of Object.entries(parsed)) {
    if (!isRecord(urls)) continue;
    store[api] = Object.fromEntries(
      Object.entries(urls).filter((e): e is [string, string] => typeof e[1] === 'string'),
    );
  }
  return store;
}

/**
 * Writes 0600 in a 0700 directory through a temporary file renamed into place, as the
 * config file is: the URLs carry passwords, and a crash must not leave half a file.
 */
async function writeStore(store: SavedUrls, file: string): Promise<void> {
  const dir = path.dirname(file);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  // Random, not just the pid: two commands of one shell script may save at once.
  const tmp = path.join(dir, `.${path.basename(file)}.${randomBytes(6).toString('hex')}.tmp`);
  try {
    await writeFile(tmp, `${JSON.stringify(store, null, 2)}\n`, { mode: 0o600 });
    await chmod(tmp, 0o600);
    await rename(tmp, file);
  } catch (err) {
    await rm(tmp, { force: true });
    throw new CliError(`cannot write ${file}: ${(err as Error).message}`);
  }
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
