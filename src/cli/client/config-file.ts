/**
 * Where the CLI keeps its API address and key, and how the environment overrides them.
 * This is the client's own configuration, so unlike the server it reads `process.env`
 * itself (the server's config goes through src/config.ts only).
 */
import os from 'node:os';
import path from 'node:path';
import { CliError } from './errors.js';
import { readJsonObject, writePrivateJson } from './private-json.js';

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
  const obj = await readJsonObject(file);
  const config: ConfigFile = {};
  if (typeof obj.apiUrl === 'string') config.apiUrl = obj.apiUrl;
  if (typeof obj.apiKey === 'string') config.apiKey = obj.apiKey;
  return config;
}

/** Writes the config file (it holds a full-access key): 0600, atomically. */
export async function writeConfigFile(
  config: ConfigFile,
  file: string = configPath(),
): Promise<void> {
  await writePrivateJson(file, config);
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
