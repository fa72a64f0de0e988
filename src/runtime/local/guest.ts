/**
 * A running machine's process as the host reaches it (`MachineRuntime.guest`): the
 * sandbox's init, whose `/proc/<pid>/root` and namespaces are the machine's, and what a
 * session inside should run as — the main process's uid, gid and environment (read from
 * /proc, so secrets never touch the disk) and the image's working directory.
 */
import { readFile } from 'node:fs/promises';
import type { GuestProcess } from '../runtime.js';
import { guestId, isRunning, type SandboxRecord } from '../sandbox/index.js';
import { machineCwd } from './process.js';
import type { MachineRecord } from './records.js';

/** The `Uid:`/`Gid:` line's real id from /proc/<pid>/status. */
function idOf(status: string, field: 'Uid' | 'Gid'): number | undefined {
  const line = status.split('\n').find((l) => l.startsWith(`${field}:`));
  const id = Number(line?.split(/\s+/)[1]);
  return Number.isInteger(id) ? id : undefined;
}

/** NUL-separated `KEY=value` pairs, as in /proc/<pid>/environ. */
export function parseEnviron(text: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const pair of text.split('\0')) {
    const eq = pair.indexOf('=');
    if (eq > 0) env[pair.slice(0, eq)] = pair.slice(eq + 1);
  }
  return env;
}

/** The guest of a machine whose sandbox has `sandbox` as its record; undefined if not running. */
export async function guestOf(
  record: MachineRecord,
  sandbox: SandboxRecord | undefined,
): Promise<GuestProcess | undefined> {
  if (!sandbox?.main || !(await isRunning(sandbox.init)) || !(await isRunning(sandbox.main)))
    return undefined;
  const main = sandbox.main.pid;
  const [status, environ] = await Promise.all([
    readFile(`/proc/${main}/status`, 'utf8').catch(() => ''),
    readFile(`/proc/${main}/environ`, 'utf8').catch(() => ''),
  ]);
  const hostUid = idOf(status, 'Uid');
  const hostGid = idOf(status, 'Gid');
  if (hostUid === undefined || hostGid === undefined) return undefined;
  // As the machine knows them: the host's ids are its own shifted (sandbox/userns.ts).
  const [uid, gid] = [guestId(hostUid), guestId(hostGid)];
  return {
    initPid: sandbox.init.pid,
    mainPid: main,
    uid,
    gid,
    cwd: machineCwd(record.image.config),
    env: parseEnviron(environ),
    cgroup: sandbox.cgroup,
    ...(sandbox.runtimeName === 'runsc' ? { filesReachable: false, ownNetworkStack: true } : {}),
  };
}
