/**
 * Runs the real `pier` binary (this run's sources, transpiled once by the global setup:
 * helpers/cli-build.ts) as a child process, the way a person would, with an environment
 * built from scratch so the developer's own pier settings can never leak into a test.
 */
import { type ChildProcess, execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { ConfigInput } from '../../src/config.js';
import { inject } from 'vitest';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';

export const ENTRY = [inject('cliEntry')];

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export interface CliOptions {
  /** Extra environment; undefined values remove a variable. */
  env?: Record<string, string | undefined>;
  /** Text written to the child's stdin (stdin is closed either way). */
  input?: string;
  /** How long the command may run (default 25 s); a deploy with a build takes longer. */
  timeoutMs?: number;
}

/** process.env without anything that configures the pier client. */
export function cleanEnv(extra: Record<string, string | undefined> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const k of ['PIER_API_URL', 'PIER_API_KEY', 'PIER_CONFIG', 'PIER_LOGIN_POLL_MS'])
    delete env[k];
  for (const [k, v] of Object.entries(extra)) {
    if (v === undefined) delete env[k];
    else env[k] = v;
  }
  return env;
}

/** Runs `pier ...args` to completion. */
export function runCli(args: string[], opts: CliOptions = {}): Promise<CliResult> {
  return new Promise((resolve) => {
    const child: ChildProcess = execFile(
      process.execPath,
      [...ENTRY, ...args],
      { env: cleanEnv(opts.env), timeout: opts.timeoutMs ?? 25_000 },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === 'number' ? err.code : null) : 0;
        resolve({ code, stdout: String(stdout), stderr: String(stderr) });
      },
    );
    child.stdin?.end(opts.input ?? '');
  });
}

/** A temporary directory for one test file's config files. */
export async function tempDir(): Promise<{ dir: string; remove: () => Promise<void> }> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'pier-cli-test-'));
  return { dir, remove: () => rm(dir, { recursive: true, force: true }) };
}

/** What a CLI test file works with: a platform, an organization, and a `pier` signed in to it. */
export interface CliBed {
  tp: TestPlatform;
  org: TestOrg;
  tmp: Awaited<ReturnType<typeof tempDir>>;
  /** The client's settings: its own config file, the platform's URL, the org's key. */
  env: Record<string, string>;
}

/** Starts a platform (with `config`), makes an organization, and points `pier` at it. */
export async function startCliBed(config: ConfigInput = {}): Promise<CliBed> {
  const tp = await startTestPlatform(config);
  const org = await tp.createOrg();
  const tmp = await tempDir();
  const env = {
    PIER_CONFIG: path.join(tmp.dir, 'config.json'),
    PIER_API_URL: tp.url,
    PIER_API_KEY: org.token,
  };
  return { tp, org, tmp, env };
}

/** Runs `pier` with the settings `env()` gives at the time of the call, plus `opts.env`. */
export const pierWith =
  (env: () => Record<string, string>) =>
  (args: string[], opts: CliOptions = {}): Promise<CliResult> =>
    runCli(args, { ...opts, env: { ...env(), ...opts.env } });
