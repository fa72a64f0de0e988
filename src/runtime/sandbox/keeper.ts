/**
 * The keeper: a small detached process per sandbox, started by pier and living exactly
 * as long as the sandbox (like containerd's shim). It
 *
 * - writes the sandbox's OCI bundle (on /run, never a disk: the configuration holds the
 *   environment; `runc exec` reads it for every session) and runs `runc run` in the
 *   foreground, so it learns the exit status and records it in
 *   `exit.json` whether or not pier is running; runc puts the sandbox's processes in the
 *   machine's cgroup (`cgroupsPath`) before any of them runs;
 * - holds the read ends of the sandbox's stdout and stderr (named pipes in the state
 *   directory, real pipes) and writes what comes through into the capped log
 *   (log-writer.ts);
 * - when the machine's process ends, makes sure nothing of the sandbox is left
 *   (`runc delete --force`).
 *
 * Run as `node keeper.js` with an IPC channel; pier sends the StartMessage, perhaps long
 * after the keeper started (one is kept ready: run.ts). Its own diagnostics go to
 * `keeper.log` in the state directory.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import {
  closeSync,
  constants,
  existsSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { LogWriter } from './log-writer.js';
import type { LogStream } from './logs.js';
import { childrenOf, isRunning, kill, procRef, sleep, type ProcRef } from './proc.js';
import {
  STATE_FILES,
  type ExitStatus,
  type KeeperMessage,
  type PierMessage,
  type SandboxRecord,
  type StartMessage,
} from './protocol.js';
import { restoreAddresses, saveAddresses, type NetnsAddresses } from './netns-addresses.js';
import { runArgv } from './runtimes.js';

const say = (msg: KeeperMessage) => {
  if (process.connected) process.send?.(msg);
};
/** keeper.log in the state directory, opened on the start message (a keeper may be started ahead, before it knows its machine). */
let logFd: number | undefined;
const note = (text: string) => {
  const line = `${new Date().toISOString()} ${text}\n`;
  if (logFd === undefined) process.stderr.write(line);
  else writeSync(logFd, line);
};

let phase: 'waiting' | 'running' | 'ending' = 'waiting';
let runtime: ChildProcess | undefined;
let init: ProcRef | undefined;
let begun = false;
let started: StartMessage | undefined;
/** Under runsc, the machine's netns addresses it takes over: given back at the end. */
let saved: { netns: string; addresses: NetnsAddresses } | undefined;
/** Settles once start() has said `started` or `failed`. */
let startSettled: Promise<void> = Promise.resolve();

process.on('message', (msg: PierMessage) => {
  if (msg.type === 'start' && !begun) {
    begun = true;
    started = msg;
    startSettled = start(msg).catch((err: Error) => fail(err.message));
  }
});

// Pier gone (or giving up) before the sandbox ran: nothing of it may be left behind.
process.on('disconnect', () => {
  if (phase === 'waiting') fail('pier went away before the sandbox started');
});

// A keeper that dies takes the machine's log pipes with it; better to note and go on.
process.on('uncaughtException', (err) => note(`uncaught: ${err.stack ?? err.message}`));

function fail(message: string): void {
  note(`start failed: ${message}`);
  say({ type: 'failed', message });
  if (runtime?.pid !== undefined) kill(runtime.pid, 'SIGKILL');
  if (started) deleteContainer(started);
  if (!runtime) {
    giveAddressesBack();
    process.exit(1);
  } // else the exit handler records the end and exits
}

/** `runc delete --force`: kills whatever is left of the sandbox and forgets its state. */
function deleteContainer(msg: StartMessage): void {
  const [binary, ...global] = msg.command as [string, ...string[]];
  try {
    execFileSync(binary, [...global, 'delete', '--force', msg.id], {
      stdio: 'ignore',
      timeout: 10_000,
    });
  } catch {
    // Nothing by that name: the usual case.
  }
}

/** Puts back what runsc took from the machine's netns, so its next start finds it. */
function giveAddressesBack(): void {
  if (!saved) return;
  try {
    restoreAddresses(saved.netns, saved.addresses);
  } catch (err) {
    note(`netns addresses not restored: ${(err as Error).message}`);
  }
}

/** Makes the two fifos; returns their read ends and the write ends for runc. */
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
  logFd = openSync(path.join(msg.stateDir, STATE_FILES.keeperLog), 'w', 0o600);
  const log = LogWriter.open(msg.stateDir, msg.logMaxBytes);
  const fifos = openFifos(msg.stateDir);
  // A sandbox of this id left by a keeper that was killed would make `run` refuse
  // (runc keeps its state in `<root>/<id>`: without one, a run of runc is saved; runsc
  // names its state files otherwise, so it is always asked).
  if (msg.runtime !== 'runc' || existsSync(path.join(msg.root, msg.id))) deleteContainer(msg);
  mkdirSync(msg.bundle, { recursive: true, mode: 0o700 });
  const configFile = path.join(msg.bundle, 'config.json');
  const pidFile = path.join(msg.bundle, 'init.pid');
  rmSync(pidFile, { force: true });
  writeFileSync(configFile, JSON.stringify(msg.config), { mode: 0o600 });
  const procDir = path.join(msg.bundle, 'proc');
  mkdirSync(procDir, { recursive: true, mode: 0o700 });
  const netns = msg.config.linux.namespaces.find((n) => n.type === 'network')?.path;
  const argv = runArgv(msg.runtime, msg.command, {
    id: msg.id,
    bundle: msg.bundle,
    pidFile,
    procDir,
    ...(netns === undefined ? {} : { netns }),
  });
  if (msg.runtime === 'runsc' && netns !== undefined) {
    saved = { netns, addresses: saveAddresses(netns) };
  }
  const [binary, ...args] = argv as [string, ...string[]];
  const child = spawn(binary, args, {
    stdio: ['ignore', fifos[0]?.write, fifos[1]?.write],
    env: { PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' },
    cwd: '/',
  });
  runtime = child;
  for (const f of fifos) closeSync(f.write); // only runc may hold them open
  const drained = fifos.map(
    ({ stream, read }) =>
      new Promise<void>((resolve) => {
        const pipe = new net.Socket({ fd: read, readable: true, writable: false });
        pipe.on('data', (chunk: Buffer) => log.append(stream, chunk));
        pipe.on('end', resolve);
        pipe.on('error', (err) => (note(`${stream}: ${err.message}`), resolve()));
      }),
  );
  let over = false;
  const exited = new Promise<ExitStatus>((resolve) => {
    child.once('exit', (code, signal) => resolve(exitStatus(code, signal)));
    child.once('error', (err) => {
      note(`spawn ${binary}: ${err.message}`);
      resolve(exitStatus(127, null));
    });
  });
  void exited.then((status) => {
    over = true;
    return finish(msg, log, drained, status);
  });

  const initPid = await waitPidFile(pidFile, () => over);
  if (initPid === undefined) throw new Error('runc ended before it started the sandbox');
  // A process that ended at once still started: its exit status tells the rest.
  init = (await procRef(initPid)) ?? { pid: initPid, start: 0 };
  // Under runsc the pid is the Sentry's: the machine's processes are gVisor's, not the
  // host's, and the Sentry's children are its ptrace stubs. It is the machine's process
  // as far as the host can tell (it lives as long as the machine's init does).
  const main = msg.runtime === 'runsc' ? init : await findMain(init.pid, () => over);
  const [keeper, runc] = [await procRef(process.pid), await procRef(child.pid as number)];
  const record: SandboxRecord = {
    id: msg.id,
    stateDir: msg.stateDir,
    cgroup: msg.cgroup,
    keeper: keeper as ProcRef,
    runtime: runc ?? { pid: child.pid as number, start: 0 },
    runtimeName: msg.runtime,
    init,
    ...(main ? { main } : {}),
    startedAt: new Date().toISOString(),
  };
  writeAtomic(msg.recordFile, record);
  phase = 'running';
  say({ type: 'started', pid: main?.pid ?? init.pid });
}

/** The init's pid once runc has written it (the sandbox then exists); undefined if runc ended. */
async function waitPidFile(file: string, over: () => boolean): Promise<number | undefined> {
  const deadline = Date.now() + 30_000;
  const written = () => {
    const pid = Number(readText(file));
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  };
  while (!over() && Date.now() < deadline) {
    const pid = written();
    if (pid) return pid;
    await sleep(1);
  }
  // A process that fails at once (no such program) may end, with runc, between two looks
  // after runc wrote the file: it started all the same.
  return written();
}

function readText(file: string): string {
  try {
    return readFileSync(file, 'utf8').trim();
  } catch {
    return '';
  }
}

/**
 * The machine's process: the init's child (pid 2 inside). Polls until the init has
 * forked it (a few ms) or the sandbox ended.
 */
async function findMain(initPid: number, over: () => boolean): Promise<ProcRef | undefined> {
  const deadline = Date.now() + 10_000;
  while (!over() && Date.now() < deadline) {
    const [child] = await childrenOf(initPid);
    if (child !== undefined) return procRef(child);
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
  // Ended once the init was seen: start() reports `started` (a short-lived process is
  // not a failure). Ended before: start() fails.
  await startSettled;
  phase = 'ending';
  // Leftovers (daemons, orphans) die with pid 1; runc has usually removed the rest.
  if (init && (await isRunning(init))) kill(init.pid, 'SIGKILL');
  deleteContainer(msg);
  giveAddressesBack();
  // The bundle (on /run) held the environment; `runc exec` read it until now.
  rmSync(msg.bundle, { recursive: true, force: true });
  await Promise.race([Promise.all(drained), sleep(5_000)]);
  log.close();
  writeAtomic(path.join(msg.stateDir, STATE_FILES.exit), status);
  note(`sandbox ended: ${JSON.stringify(status)}`);
  process.exit(0);
}
