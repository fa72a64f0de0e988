/** The options every API command shares, and turning them into a connected client. */
import type { Command } from 'commander';
import { ApiClient } from './api-client.js';
import { resolveSettings } from './config-file.js';
import { CliError } from './errors.js';

/** Options common to API commands. */
export interface CommonOptions {
  apiUrl?: string;
  json?: boolean;
}

/** Adds `--api-url` and, for commands that print an answer, `--json`. */
export function withCommonOptions(cmd: Command, opts: { json?: boolean } = {}): Command {
  cmd.option('--api-url <url>', 'API address (default: PIER_API_URL, else the one saved by login)');
  if (opts.json ?? true) cmd.option('--json', 'print the raw JSON answer');
  return cmd;
}

/** A client with a key, or a clear hint on how to get one. */
export async function connect(opts: CommonOptions): Promise<ApiClient> {
  const settings = await resolveSettings(opts);
  if (!settings.apiKey) {
    throw new CliError(`no API key for ${settings.apiUrl}; run \`pier login\` or set PIER_API_KEY`);
  }
  return new ApiClient(settings.apiUrl, settings.apiKey);
}

/**
 * Collects a repeatable option into an array. It takes no default (`[]`) so that help
 * does not print "(default: [])"; an absent option is undefined.
 */
export function collect(value: string, previous: string[] | undefined): string[] {
  return [...(previous ?? []), value];
}
