/**
 * Starting a keeper (keeper.ts) and walking it through a sandbox's start: it runs runc
 * and reports the machine's pid. A failure anywhere disconnects the IPC channel, on
 * which the keeper kills whatever it started, so a failed start leaves no process.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { nodeScriptArgv } from '../../host/spawner/node-script.js';
import { readLogs } from './logs.js';
import { sleep } from './proc.js';
import { STATE_FILES, type KeeperMessage, type StartMessage } from './protocol.js';

/**
 * Spawns a keeper detached (own session: it outlives pier), its diagnostics in
 * keeper.log of `stateDir`. Without one it is a keeper started ahead of its machine:
 * what it says before its start message (it says nothing unless it fails) goes nowhere,
 * and it opens its machine's keeper.log once told which.
 */
export function spawnKeeper(stateDir?: string): ChildProcess {
  const log =
    stateDir === undefined
      ? 'ignore'
      : openSync(path.join(stateDir, STATE_FILES.keeperLog), 'w', 0o600);
  try {
    return spawn(process.execPath, nodeScriptArgv(import.meta.url, 'keeper'), {
      detached: true,
      stdio: ['ignore', log, log, 'ipc'],
      cwd: '/',
      env: { PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' },
    });
  } finally {
    if (typeof log === 'number') closeSync(log);
  }
}

/**
 * Sends `start` to `keeper` and answers its handshake; resolves with the machine's pid.
 * On failure or after `timeoutMs`, disconnects (the keeper then kills what it started)
 * and rejects with the end of the sandbox's stderr and the keeper's own log.
 */
export function handshake(
  keeper: ChildProcess,
  start: StartMessage,
  timeoutMs: number,
): Promise<number> {
  const gone = new Promise<void>((resolve) => keeper.once('exit', () => resolve()));
  return new Promise<number>((resolve, reject) => {
    let settled = false;
    const settle = (err: Error | undefined, pid?: number) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      keeper.off('message', onMessage);
      if (keeper.connected) keeper.disconnect();
      // Give the keeper a moment to kill what it started and log why, then explain.
      if (err)
        void Promise.race([gone, sleep(2_000)]).then(() =>
          explain(err, start.stateDir).then(reject),
        );
      else resolve(pid as number);
    };
    const timer = setTimeout(
      () => settle(new Error(`sandbox ${start.id} did not start within ${timeoutMs} ms`)),
      timeoutMs,
    );
    const onMessage = (msg: KeeperMessage) => {
      if (msg.type === 'started') {
        settle(undefined, msg.pid);
      } else {
        settle(new Error(msg.message));
      }
    };
    keeper.on('message', onMessage);
    keeper.once('error', (err) => settle(err));
    keeper.once('exit', (code, signal) =>
      settle(new Error(`the keeper exited (${code ?? signal}) before the sandbox started`)),
    );
    keeper.send(start);
  });
}

/** `err` with the last lines the sandbox wrote to stderr and the keeper's log. */
async function explain(err: Error, stateDir: string): Promise<Error> {
  const stderr = await readLogs(stateDir, { tail: 20 })
    .then((p) => p.entries.filter((e) => e.stream === 'stderr').map((e) => e.text))
    .catch(() => []);
  const keeperLog = await readFile(path.join(stateDir, STATE_FILES.keeperLog), 'utf8').catch(
    () => '',
  );
  const detail = [...stderr, ...keeperLog.trim().split('\n').slice(-5)].filter(Boolean);
  if (detail.length > 0) err.message += `\n${detail.join('\n')}`;
  return err;
}
