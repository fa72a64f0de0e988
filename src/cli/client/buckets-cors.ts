/**
 * `pier buckets cors`: show or replace a bucket's CORS rules (spec 2.7, 4.5). The server
 * keeps rules that can never match but names them in `warnings`, shown on stderr.
 */
import { readFile } from 'node:fs/promises';
import type { Command } from 'commander';
import { apiPath } from './api-client.js';
import type { Cors, CorsRule } from './buckets-types.js';
import { type CommonOptions, connect, withCommonOptions } from './connect.js';
import { CliError, action } from './errors.js';
import { readStdin } from './input.js';
import { printFields, printJson, say } from './output.js';

interface CorsOptions extends CommonOptions {
  set?: string;
}

/** Registers `pier buckets cors`. */
export function registerBucketCors(buckets: Command): void {
  withCommonOptions(
    buckets
      .command('cors')
      .description("show a bucket's CORS rules, or replace them with --set")
      .addHelpText(
        'after',
        `
The file holds {"rules": [...]} or just the array; each rule has allowedMethods and
allowedOrigins, and may have allowedHeaders, exposeHeaders, maxAgeSeconds and id.
An empty array removes every rule.

Example:
  echo '[{"allowedMethods":["GET"],"allowedOrigins":["https://example.com"]}]' |
    pier buckets cors media --set -`,
      ),
  )
    .argument('<bucket>', 'bucket name')
    .option('--set <file>', 'replace the rules with those in a JSON file (- reads stdin)')
    .action(
      action(async (bucket: string, opts: CorsOptions) => {
        const client = await connect(opts);
        const cors =
          opts.set === undefined
            ? await client.call<Cors>('GET', apiPath`/v1/buckets/${bucket}/cors`)
            : await client.call<Cors>('PUT', apiPath`/v1/buckets/${bucket}/cors`, {
                rules: await readRules(opts.set),
              });
        if (opts.json) return printJson(cors);
        if (opts.set !== undefined) {
          const n = cors.rules.length;
          say(
            n === 0
              ? `Removed the CORS rules of ${bucket}.`
              : `Set ${n} CORS rule${n === 1 ? '' : 's'} on ${bucket}.`,
          );
        } else {
          printRules(bucket, cors.rules);
        }
        for (const w of cors.warnings ?? []) process.stderr.write(`Warning: ${w}\n`);
      }),
    );
}

/** The rules of a file or stdin: `{rules: [...]}` as the API answers, or the bare array. */
async function readRules(file: string): Promise<unknown[]> {
  const text =
    file === '-'
      ? await readStdin('the CORS rules (JSON)')
      : await readFile(file, 'utf8').catch((err: NodeJS.ErrnoException) => {
          throw new CliError(`cannot read ${file}: ${err.code ?? err.message}`);
        });
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new CliError(`${file === '-' ? 'stdin' : file} is not valid JSON`);
  }
  if (Array.isArray(parsed)) return parsed;
  const rules = (parsed as { rules?: unknown } | null)?.rules;
  if (Array.isArray(rules)) return rules;
  throw new CliError('the CORS file must hold {"rules": [...]} or an array of rules');
}

function printRules(bucket: string, rules: CorsRule[]): void {
  if (rules.length === 0) return say(`No CORS rules on ${bucket}.`);
  rules.forEach((r, i) => {
    if (i > 0) say('');
    say(`Rule ${i + 1}${r.id ? ` (${r.id})` : ''}`);
    printFields([
      ['  Methods', list(r.allowedMethods)],
      ['  Origins', list(r.allowedOrigins)],
      ['  Headers', r.allowedHeaders && list(r.allowedHeaders)],
      ['  Expose', r.exposeHeaders && list(r.exposeHeaders)],
      ['  Max age', r.maxAgeSeconds === undefined ? undefined : `${r.maxAgeSeconds}s`],
    ]);
  });
}

/** An empty list says so, rather than printing nothing after the label. */
function list(values: string[]): string {
  return values.length === 0 ? '(none)' : values.join(', ');
}
