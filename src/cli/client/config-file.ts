/**
 * Where the CLI keeps its API address and key, and how the environment overrides them.
 * This is the client's own configuration, so unlike the server it reads `process.env`
 * itself (the server's config goes through src/config.ts only).
 */
import { chmod, mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { CliError } from './errors.js';

/** The default `pier serve` listen address (CONTRACT 1). */
export const DEFAULT_API_URL = 'http://127.0.0.1:8080';

/** What the config file holds. Both fields are optional so a partial file still loads. */
export interface ConfigFile {
  apiUrl?: string;
  apiKey?: string;
}

/** The address and key a command will use, after flags, environment and file. */
export interface Settings {
  apiUrl: string;
  apiKey?: string;
  /** Where the key came from, for messages ("set PIER_API_KEY or run pier login"). */
  keySource?: 'env' | 'file';
}

type Env = Record<string, string | undefined>;

/** `$PIER_CONFIG`, else `$XDG_CONFIG_HOME/pier/config.json`, else `~/.config/pier/config.json`. */
export function configPath(env: Env = process.env): string {
  if (env.PIER_CONFIG) return path.resolve(env.PIER_CONFIG);
  const base = env.XDG_CONFIG_HOME || path.join(os.homedir(), '.config');
  return path.join(base, 'pier', 'config.json');
}

/** Reads the config file; a missing file is an empty config, a broken one is an error. */
export async function readConfigFile(file: string = configPath()): Promise<ConfigFile> {
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
    throw new CliError(`${file} is not valid JSON; fix or remove it`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new CliError(`${file} must hold a JSON object`);
  }
  const obj = parsed as Record<string, unknown>;
  const config: ConfigFile = {};
  if (typeof obj.apiUrl === 'string') config.apiUrl = obj.apiUrl;
  if (typeof obj.apiKey === 'string') config.apiKey = obj.apiKey;
  return config;
}

/**
 * Writes the config file with mode 0600 in a directory created 0700: it holds a
 * full-access key. The write goes to a temporary file renamed into place, so a crash
 * never leaves half a file, and the key is never readable by others even for a moment.
 */
export async function writeConfigFile(
  config: ConfigFile,
  file: string = configPath(),
): Promise<void> {
  const dir = path.dirname(file);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const tmp = path.join(dir, `.${path.basename(file)}.${process.pid}.tmp`);
  await writeFile(tmp, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o600 });
  // The umask cannot widen 0600, but an old file left by someone else might be wider.
  await chmod(tmp, 0o600);
  await rename(tmp, file);
}

/** Checks and normalizes an API address (no trailing slash, http or https only). */
export function normalizeApiUrl(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new CliError(`'${raw}' is not a URL; give the API address, e.g. ${DEFAULT_API_URL}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new CliError(`'${raw}' must be an http or https address`);
  }
  return url.toString().replace(/\/+$/, '');
}

/**
 * Works out address and key: `--api-url` flag, then `PIER_API_URL`, then the file, then
 * the default; `PIER_API_KEY`, then the file. The saved key is only used for the address
 * it was saved with, so pointing the CLI at another server never hands it the key.
 */
export async function resolveSettings(
  flags: { apiUrl?: string },
  env: Env = process.env,
): Promise<Settings> {
  const file = await readConfigFile(configPath(env));
  const apiUrl = normalizeApiUrl(
    flags.apiUrl ?? env.PIER_API_URL ?? file.apiUrl ?? DEFAULT_API_URL,
  );
  if (env.PIER_API_KEY) return { apiUrl, apiKey: env.PIER_API_KEY, keySource: 'env' };
  const savedFor = file.apiUrl ? normalizeApiUrl(file.apiUrl) : undefined;
  if (file.apiKey && (savedFor === undefined || savedFor === apiUrl)) {
    return { apiUrl, apiKey: file.apiKey, keySource: 'file' };
  }
  return { apiUrl };
}
