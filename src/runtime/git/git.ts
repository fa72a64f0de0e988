/**
 * Debian's `git`, run by pier on the bare repositories pushes land in: always with
 * argument arrays, an environment of pier's making (no system or global config, no
 * variables of the host's git leaking in, no prompt), and the push policy given as `-c`
 * options on every run, so it holds for every repository whatever its own config says
 * (and none of it is something a pusher can write).
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdir, rename, rm } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import path from 'node:path';

/** What a push may bring, decided by pier (docs/api.md, "git push"). */
export interface PushPolicy {
  /** The pack a push sends may be at most this many bytes (`receive.maxInputSize`). */
  maxInputBytes: number;
  /** Where the hooks live (`core.hooksPath`): pier's own, never the repository's. */
  hooksDir: string;
}

/** `-c` options of every receive-pack pier runs. */
export function policyArgs(policy: PushPolicy): string[] {
  const settings: [string, string][] = [
    ['core.hooksPath', policy.hooksDir],
    ['receive.maxInputSize', String(policy.maxInputBytes)],
    // Every object is checked as it arrives: malformed trees, `.git` or `..` names, bad
    // modes and the like are refused before anything reads them.
    ['receive.fsckObjects', 'true'],
    // A force push is how a person deploys an older commit again, or pushes over a
    // colleague's push they cannot fetch (fetching is not offered).
    ['receive.denyNonFastForwards', 'false'],
    // Deleting a branch removes its preview; pier's hook refuses deleting main (plan.ts).
    ['receive.denyDeletes', 'false'],
    ['receive.advertisePushOptions', 'false'],
    ['receive.shallowUpdate', 'false'],
    // `git gc --auto` after a push runs in the request, never as a daemon left behind.
    ['gc.autoDetach', 'false'],
    ['core.logAllRefUpdates', 'false'],
  ];
  return settings.flatMap(([k, v]) => ['-c', `${k}=${v}`]);
}

/** The environment of every git pier runs: only what git needs, plus `extra`. */
export function gitEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: '/nonexistent',
    LANG: 'C',
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
    GIT_TERMINAL_PROMPT: '0',
    GIT_ATTR_NOSYSTEM: '1',
    ...extra,
  };
}

/** Runs `git args` to its end; answers stdout; throws with stderr when it fails. */
export function runGit(
  args: string[],
  opts: { env?: Record<string, string>; cwd?: string } = {},
): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      'git',
      args,
      { env: gitEnv(opts.env), cwd: opts.cwd, maxBuffer: 1024 * 1024, timeout: 60_000 },
      (err, stdout, stderr) => {
        if (err) reject(new Error(`git ${args[0] ?? ''} failed: ${stderr.trim() || err.message}`));
        else resolve(stdout);
      },
    );
  });
}

/**
 * Makes the bare repository `dir` if it is not there: made beside it and renamed into
 * place, so a concurrent first push never sees half a repository. No template: no
 * sample hooks, no description file.
 */
export async function ensureBareRepo(dir: string): Promise<void> {
  await mkdir(path.dirname(dir), { recursive: true, mode: 0o700 });
  const head = await runGit(['--git-dir', dir, 'rev-parse', '--git-dir']).catch(() => undefined);
  if (head !== undefined) return;
  const tmp = `${dir}.tmp-${randomBytes(6).toString('hex')}`;
  try {
    await runGit(['init', '--quiet', '--bare', '--template=', '--initial-branch=main', tmp]);
    await rename(tmp, dir).catch(async (err: NodeJS.ErrnoException) => {
      // Another push made it first: theirs is as good as ours.
      if (err.code !== 'ENOTEMPTY' && err.code !== 'EEXIST') throw err;
    });
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
}

/** The commit `ref` names in `dir`, or undefined when there is no such ref. */
export async function refValue(dir: string, ref: string): Promise<string | undefined> {
  const out = await runGit([
    '--git-dir',
    dir,
    'rev-parse',
    '--verify',
    '--quiet',
    '--end-of-options',
    `${ref}^{commit}`,
  ]).catch(() => undefined);
  return out?.trim() || undefined;
}

/**
 * `git receive-pack` on `dir`: `advertise` answers the refs only (smart HTTP's
 * `info/refs`), `stateless` one round of commands and pack (smart HTTP's POST), `session`
 * the whole conversation (SSH). stdio is pipes; the caller wires them.
 */
export function spawnReceivePack(
  dir: string,
  mode: 'advertise' | 'stateless' | 'session',
  policy: PushPolicy,
  env: Record<string, string> = {},
): ChildProcess {
  const flags =
    mode === 'advertise'
      ? ['--stateless-rpc', '--advertise-refs']
      : mode === 'stateless'
        ? ['--stateless-rpc']
        : [];
  return spawn('git', [...policyArgs(policy), 'receive-pack', ...flags, dir], {
    env: gitEnv(env),
    stdio: ['pipe', 'pipe', 'pipe'],
  });
}
