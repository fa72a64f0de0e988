/**
 * The keeper: a small detached process per sandbox, started by pier and living exactly
 * as long as the sandbox (like containerd's shim). It
 *
 * - spawns bwrap and is its parent, so it learns the exit status and records it in
 *   `exit.json` whether or not pier is running;
 * - holds the read ends of the sandbox's stdout and stderr (named pipes in the state
 *   directory, real pipes, so `/dev/stdout` can be opened inside) and writes what
 *   comes through into the capped log (log-writer.ts);
 * - writes the identity uid/gid maps of the sandbox's user namespace while bwrap waits,
 *   and lets bwrap go on only after pier moved it into the machine's cgroup, so every
 *   process of the machine is born inside its limits;
 * - when the machine's process ends, kills the sandbox's pid 1, which takes every
 *   leftover process of the sandbox with it.
 *
 * Run as `node keeper.js` with an IPC channel; pier sends the StartMessage, then `go`.
 * Its own diagnostics go to `keeper.log` in the state directory.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { closeSync, constants, openSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { Readable, Writable } from 'node:stream';
import { LogWriter } from './log-writer.js';
import type { LogStream } from './logs.js';
import { childrenOf, innerPid, isRunning, kill, procRef, sleep, type ProcRef } from './proc.js';
import {
  FD,
  STATE_FILES,
  type ExitStatus,
  type KeeperMessage,
  type PierMessage,
  type SandboxRecord,
  type StartMessage,
} from './protocol.js';

const say = (msg: KeeperMessage) => {
  if (process.connected) process.send?.(msg);
};
const note = (text: string) => process.stderr.write(`${new Date().toISOString()} ${text}\n`);

let phase: 'waiting' | 'spawned' | 'running' | 'ending' = 'waiting';
let sandbox: ChildProcess | undefined;
let init: ProcRef | undefined;
let begun = false;
let goGiven = false;
let goReceived: () => void = () => {};
const go = new Promise<void>((resolve) => (goReceived = resolve));
/** Settles once start() has said `started` or `failed`. */
let startSettled: Promise<void> = Promise.resolve();

process.on('message', (msg: PierMessage) => {
  if (msg.type === 'start' && !begun) {
    begun = true;
    startSettled = start(msg).catch((err: Error) => fail(err.message));
  } else if (msg.type === 'go' && phase === 'spawned') {
    goGiven = true;
    goReceived();
  }
});

// Pier gone (or giving up) before the sandbox ran: nothing of it may be left behind.
process.on('disconnect', () => {
  if (phase === 'waiting' || phase === 'spawned') fail('pier went away before the sandbox started');
});

// A keeper that dies takes the machine's log pipes with it; better to note and go on.
process.on('uncaughtException', (err) => note(`uncaught: ${err.stack ?? err.message}`));

function fail(message: string): void {
  note(`start failed: ${message}`);
  say({ type: 'failed', message });
  if (sandbox?.pid !== undefined) kill(sandbox.pid, 'SIGKILL');
  if (init) kill(init.pid, 'SIGKILL');
  if (!sandbox) process.exit(1); // else the exit handler records the end and exits
}

/** Makes the two fifos; returns their read ends and the write ends for bwrap. */
function openFifos(dir: string): { stream: LogStream; read: number; write: number }[] {
  const files = [path.join(dir, STATE_FILES.stdout), path.join(dir, STATE_FILES.stderr)];
  for (const f of files) rmSync(f, { force: true });
  execFileSync('mkfifo', ['-m', '0600', ...files]);
  return (['stdout', 'stderr'] as const).map((stream, i) => {
    const file = files[i] as string;
    // The read end first, non-blocking, so opening the write end finds a reader.
    const read = openSync(file, constants.O_RDONLY | constants.O_NONBLOCK);
    const write = openSync(file, constants.O_WRONLY);
    return { stream, read, write };
  });
}

/** Everything bwrap writes on fd `stream` until it closes. */
function readAll(stream: Readable): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = '';
    stream.setEncoding('utf8');
    stream.on('data', (d: string) => (text += d));
    stream.on('end', () => resolve(text));
    stream.on('error', reject);
  });
}

function exitStatus(code: number | null, signal: NodeJS.Signals | null): ExitStatus {
  let sig = signal;
  if (sig === null && code !== null && code > 128) {
    const name = Object.entries(os.constants.signals).find(([, n]) => n === code - 128)?.[0];
    sig = (name as NodeJS.Signals | undefined) ?? null;
  }
  return { code, signal: sig, at: new Date().toISOString() };
}

function writeAtomic(file: string, data: unknown): void {
  writeFileSync(`${file}.tmp`, `${JSON.stringify(data)}\n`, { mode: 0o644 });
  renameSync(`${file}.tmp`, file);
}

async function start(msg: StartMessage): Promise<void> {
  const log = LogWriter.open(msg.stateDir, msg.logMaxBytes);
  const fifos = openFifos(msg.stateDir);
  const [file, ...args] = msg.command as [string, ...string[]];
  const child = spawn(file, args, {
    stdio: ['ignore', fifos[0]?.write, fifos[1]?.write, 'pipe', 'pipe', 'pipe'],
    env: { PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' },
    cwd: '/',
  });
  sandbox = child;
  // Node types stdio as a 5-tuple; fds 3–5 are the pipes asked for above.
  const pipes = child.stdio as unknown as (Readable & Writable)[];
  for (const f of fifos) closeSync(f.write); // only the sandbox may hold them open
  const drained = fifos.map(
    ({ stream, read }) =>
      new Promise<void>((resolve) => {
        const pipe = new net.Socket({ fd: read, readable: true, writable: false });
        pipe.on('data', (chunk: Buffer) => log.append(stream, chunk));
        pipe.on('end', resolve);
        pipe.on('error', (err) => (note(`${stream}: ${err.message}`), resolve()));
      }),
  );
  const exited = new Promise<ExitStatus>((resolve) => {
    child.once('exit', (code, signal) => resolve(exitStatus(code, signal)));
    child.once('error', (err) => {
      note(`spawn ${file}: ${err.message}`);
      resolve(exitStatus(127, null));
    });
  });
  void exited.then((status) => finish(msg, log, drained, status));

  (pipes[FD.args] as Writable).end(msg.bwrapArgs.map((a) => `${a}\0`).join(''));
  const info = await readAll(pipes[FD.info] as Readable);
  const childPid = (JSON.parse(info || '{}') as { 'child-pid'?: number })['child-pid'];
  if (!childPid) throw new Error('bwrap ended before it started the sandbox');
  init = await procRef(childPid);
  if (!init) throw new Error('the sandbox ended before it started');
  // Every uid and gid maps to itself: file ownership means the same inside and out.
  writeFileSync(`/proc/${childPid}/uid_map`, '0 0 4294967295\n');
  writeFileSync(`/proc/${childPid}/gid_map`, '0 0 4294967295\n');
  phase = 'spawned';
  say({ type: 'spawned', bwrap: child.pid as number, init: childPid });
  await go;
  (pipes[FD.usernsBlock] as Writable).end('1');
  const main = await findMain(init.pid, exited);
  const [keeper, bwrap] = [await procRef(process.pid), await procRef(child.pid as number)];
  const record: SandboxRecord = {
    id: msg.id,
    stateDir: msg.stateDir,
    cgroup: msg.cgroup,
    keeper: keeper as ProcRef,
    bwrap: bwrap ?? { pid: child.pid as number, start: 0 },
    init,
    ...(main ? { main } : {}),
    startedAt: new Date().toISOString(),
  };
  writeAtomic(msg.recordFile, record);
  phase = 'running';
  say({ type: 'started', pid: main?.pid ?? init.pid });
}

/**
 * The machine's process: the child of the sandbox's pid 1 that is pid 2 inside. Polls
 * until bwrap has forked it (a few ms) or the sandbox ended.
 */
async function findMain(initPid: number, exited: Promise<unknown>): Promise<ProcRef | undefined> {
  let over = false;
  void exited.then(() => (over = true));
  const deadline = Date.now() + 10_000;
  while (!over && Date.now() < deadline) {
    for (const pid of await childrenOf(initPid)) {
      if ((await innerPid(pid)) === 2) return procRef(pid);
    }
    await sleep(1);
  }
  return undefined;
}

async function finish(
  msg: StartMessage,
  log: LogWriter,
  drained: Promise<void>[],
  status: ExitStatus,
): Promise<void> {
  // Ended after `go`: start() sees it and reports `started` (a short-lived process is
  // not a failure). Ended before: the start failed.
  if (goGiven) await startSettled;
  else say({ type: 'failed', message: `the sandbox ended while starting (exit ${status.code})` });
  phase = 'ending';
  // Leftovers (daemons, orphans) die with pid 1; the pipes then reach EOF.
  if (init && (await isRunning(init))) kill(init.pid, 'SIGKILL');
  await Promise.race([Promise.all(drained), sleep(5_000)]);
  log.close();
  writeAtomic(path.join(msg.stateDir, STATE_FILES.exit), status);
  note(`sandbox ended: ${JSON.stringify(status)}`);
  process.exit(0);
}
