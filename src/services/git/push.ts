/**
 * A push, whatever carried it (smart HTTP here, SSH from the gateway): Debian's
 * `git receive-pack` on the app's repository, under pier's push policy (runtime/git),
 * with pier's pre-receive hook connected to this process through a socket of the push's
 * own. The hook hands over the ref updates; `deployPush` builds and deploys the
 * production branch and says what happens, which git relays to the client as `remote:`
 * lines; the refs move only if the release went live.
 *
 * Transports authenticate and authorize first (deploy rights on the app, as `POST
 * /v1/apps/:name/deploys` wants); from here on the push acts as `orgId`. If the client
 * goes away once the pack is in, the push goes on (receive-pack's output is drained):
 * like `pier deploy`, leaving stops following, not the deploy.
 */
import type { ChildProcess } from 'node:child_process';
import { Transform, type Readable, type Writable } from 'node:stream';
import { ApiError } from '../../errors/api-error.js';
import { spawnReceivePack } from '../../runtime/git/git.js';
import { openHookChannel } from '../../runtime/git/hook-channel.js';
import { hookEnv } from '../../runtime/git/hook.js';
import { findApp, type AppRow } from '../apps/records.js';
import type { ServiceContext } from '../context.js';
import { deployPush } from './deploy-push.js';
import { lockPush, pushLocked } from './push-lock.js';
import { openAppRepo, pushPolicy } from './repos.js';

/** Past receive-pack's own cap (its message is the clearer one), the stream is cut. */
const INPUT_SLACK = 1024 * 1024;

export interface PushStreams {
  /** What the client sends: commands and pack. */
  stdin: Readable;
  /** What receive-pack answers (the protocol, with the hook's words in its side band). */
  stdout: Writable;
  /** receive-pack's own diagnostics (SSH shows them); dropped into the log when absent. */
  stderr?: Writable;
  /** Ends the push (the key was revoked, the session closed). */
  signal?: AbortSignal;
}

/** The app of `orgId` (404 `not-found` for another organization's, as for none) and its repository. */
export async function pushTarget(
  ctx: ServiceContext,
  orgId: string,
  appName: string,
): Promise<{ app: AppRow; repo: string }> {
  const app = await findApp(ctx.db, orgId, appName);
  return { app, repo: await openAppRepo(ctx, app.id) };
}

/** The refs receive-pack advertises (smart HTTP's `info/refs`), as a stream. */
export async function advertiseRefs(ctx: ServiceContext, repo: string): Promise<Readable> {
  const child = spawnReceivePack(repo, 'advertise', await pushPolicy(ctx));
  child.stdin?.end();
  child.stderr?.resume();
  return child.stdout!;
}

/**
 * Runs one receive-pack for a push to `app` of `orgId` (`stateless`: one smart HTTP
 * POST; `session`: a whole SSH conversation). Answers receive-pack's exit code once it
 * has ended and the hook's work is over.
 */
export async function receivePush(
  ctx: ServiceContext,
  orgId: string,
  target: { app: AppRow; repo: string },
  mode: 'stateless' | 'session',
  io: PushStreams,
): Promise<number> {
  const { app, repo } = target;
  const policy = await pushPolicy(ctx);
  let lock: Promise<() => void> | undefined;
  // Over once receive-pack has ended: a hook whose git is gone decides nothing.
  const ended = new AbortController();
  const channel = await openHookChannel(
    (request, say, gone) => {
      const signal = AbortSignal.any([gone, ended.signal, ...(io.signal ? [io.signal] : [])]);
      return deployPush({
        ctx,
        orgId,
        appName: app.name,
        repo,
        request,
        say,
        signal,
        lock: async () => {
          if (pushLocked(app.id)) say(`pier: waiting for another push of ${app.name} to end\n`);
          const held = (lock ??= lockPush(app.id));
          // A push whose client or git is gone stops waiting (the lock is let go at the end).
          await new Promise<void>((resolve, reject) => {
            if (signal.aborted) return reject(signal.reason as Error);
            signal.addEventListener('abort', () => reject(signal.reason as Error), { once: true });
            held.then(() => resolve(), reject);
          });
        },
      });
    },
    (err) => ctx.log.error({ err, app: app.name }, 'git push: hook channel failed'),
  );
  try {
    const child = spawnReceivePack(repo, mode, policy, hookEnv(channel.socketPath));
    const stop = () => child.kill('SIGTERM');
    if (io.signal?.aborted) stop();
    io.signal?.addEventListener('abort', stop, { once: true });
    try {
      return await run(ctx, child, io, policy.maxInputBytes + INPUT_SLACK);
    } finally {
      io.signal?.removeEventListener('abort', stop);
      ended.abort();
      await channel.settled();
    }
  } finally {
    // The refs have moved (or not): the next push of the app may decide.
    if (lock) void lock.then((release) => release());
    await channel.close();
  }
}

/** Wires the streams to receive-pack and waits for it to end. */
function run(
  ctx: ServiceContext,
  child: ChildProcess,
  io: PushStreams,
  maxInput: number,
): Promise<number> {
  let seen = 0;
  const capped = new Transform({
    transform(chunk: Buffer, _enc, done) {
      seen += chunk.length;
      if (seen > maxInput) {
        done(new ApiError('too-large', `A push may send at most ${maxInput} bytes.`));
        return;
      }
      done(null, chunk);
    },
  });
  capped.on('error', () => child.kill('SIGTERM'));
  io.stdin.on('error', () => capped.destroy());
  child.stdin!.on('error', () => undefined); // receive-pack may stop reading first
  io.stdin.pipe(capped).pipe(child.stdin!);

  drainInto(child.stdout!, io.stdout);
  let diagnostics = '';
  if (io.stderr) drainInto(child.stderr!, io.stderr);
  else {
    child.stderr!.setEncoding('utf8');
    child.stderr!.on('data', (c: string) => {
      if (diagnostics.length < 4096) diagnostics += c;
    });
  }
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code, signal) => {
      if (code !== 0 && diagnostics) {
        ctx.log.warn({ code, signal, diagnostics }, 'git push: receive-pack failed');
      }
      io.stdin.unpipe(capped);
      io.stdin.resume(); // what receive-pack did not read is drained, not left hanging
      resolve(code ?? 1);
    });
  });
}

/**
 * Copies `from` into `to` with backpressure while `to` takes it; once `to` is gone (the
 * client left), the rest is read and dropped, so git never blocks on a client that is
 * not there. Ends `to` with `from`.
 */
function drainInto(from: Readable, to: Writable): void {
  const alive = () => !to.destroyed && !to.writableEnded;
  to.on('error', () => undefined);
  to.once('close', () => from.resume());
  from.on('data', (chunk: Buffer) => {
    if (alive() && !to.write(chunk)) {
      from.pause();
      to.once('drain', () => from.resume());
    }
  });
  from.once('end', () => {
    if (alive()) to.end();
  });
}
