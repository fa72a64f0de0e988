/**
 * A real `git` client for push tests: its own HOME and config (no host settings, no
 * prompts), repositories made from a tree of files, and pushes whose output is kept.
 */
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

export interface GitResult {
  code: number;
  stdout: string;
  stderr: string;
}

export class GitClient {
  private constructor(readonly home: string) {}

  static async create(): Promise<GitClient> {
    return new GitClient(await mkdtemp(path.join(os.tmpdir(), 'pier-git-client-')));
  }

  env(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
    return {
      PATH: process.env.PATH,
      HOME: this.home,
      LANG: 'C',
      GIT_CONFIG_NOSYSTEM: '1',
      GIT_TERMINAL_PROMPT: '0',
      GIT_AUTHOR_NAME: 'Pusher',
      GIT_AUTHOR_EMAIL: 'pusher@example.com',
      GIT_COMMITTER_NAME: 'Pusher',
      GIT_COMMITTER_EMAIL: 'pusher@example.com',
      ...extra,
    };
  }

  /** Runs git; never throws for a non-zero exit (the test reads it). */
  run(args: string[], cwd: string, opts: { env?: Record<string, string>; input?: string } = {}) {
    return new Promise<GitResult>((resolve) => {
      const child = execFile(
        'git',
        args,
        { cwd, env: this.env(opts.env), maxBuffer: 16 * 1024 * 1024, timeout: 240_000 },
        (err, stdout, stderr) => {
          const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
          resolve({ code, stdout, stderr });
        },
      );
      if (opts.input !== undefined) child.stdin?.end(opts.input);
    });
  }

  /** A repository in a new directory with `files` committed on `main`. */
  async repo(name: string, files: Record<string, string>): Promise<string> {
    const dir = path.join(this.home, name);
    await mkdir(dir, { recursive: true });
    await this.must(['init', '--quiet', '--initial-branch=main'], dir);
    await this.commit(dir, files, 'first');
    return dir;
  }

  /** Writes `files` into the repository and commits them. */
  async commit(dir: string, files: Record<string, string>, message: string): Promise<void> {
    for (const [p, content] of Object.entries(files)) {
      await mkdir(path.dirname(path.join(dir, p)), { recursive: true });
      await writeFile(path.join(dir, p), content);
    }
    await this.must(['add', '-A'], dir);
    await this.must(['commit', '--quiet', '--allow-empty', '-m', message], dir);
  }

  async must(args: string[], cwd: string, input?: string): Promise<string> {
    const r = await this.run(args, cwd, input === undefined ? {} : { input });
    if (r.code !== 0) throw new Error(`git ${args.join(' ')}: ${r.stderr}`);
    return r.stdout.trim();
  }

  close(): Promise<void> {
    return rm(this.home, { recursive: true, force: true });
  }
}

/** The push URL of `app` on `base` with `key` as Basic's password (any user name). */
export function pushUrl(base: string, app: string, key?: string): string {
  const u = new URL(`${base}/git/${app}.git`);
  if (key !== undefined) {
    u.username = 'pier';
    u.password = key;
  }
  return u.toString();
}

/** The `remote:` lines of a push's output, without the prefix. */
export function remoteLines(stderr: string): string[] {
  return stderr
    .split('\n')
    .filter((l) => l.startsWith('remote: '))
    .map((l) => l.slice('remote: '.length).trimEnd());
}
