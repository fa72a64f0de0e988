/**
 * The CLI's own files that hold secrets (the config with its key, the saved database
 * URLs): JSON objects, read strictly and written 0600 in a 0700 directory through a
 * temporary file renamed into place, so a crash never leaves half a file and no other
 * user can read them even for a moment.
 */
import { randomBytes } from 'node:crypto';
import { chmod, mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { CliError } from './errors.js';

/**
 * The JSON object in `file`; a missing file is empty. A broken file is an error, never
 * a reason to start over: rewriting it would lose what it holds.
 */
export async function readJsonObject(file: string): Promise<Record<string, unknown>> {
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
    throw new CliError(`${file} is not valid JSON; fix or move it away`);
  }
  if (!isRecord(parsed)) throw new CliError(`${file} must hold a JSON object`);
  return parsed;
}

/** Writes `value` as JSON to `file`, mode 0600, atomically. */
export async function writePrivateJson(file: string, value: unknown): Promise<void> {
  const dir = path.dirname(file);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  // Random, not just the pid: two commands of one shell script may write at once.
  const tmp = path.join(dir, `.${path.basename(file)}.${randomBytes(6).toString('hex')}.tmp`);
  try {
    await writeFile(tmp, `${JSON.stringify(value, null, 2)}\n`, { mode: 0o600 });
    // The umask cannot widen 0600, but an old file left by someone else might be wider.
    await chmod(tmp, 0o600);
    await rename(tmp, file);
  } catch (err) {
    await rm(tmp, { force: true });
    throw new CliError(`cannot write ${file}: ${(err as Error).message}`);
  }
}

export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
