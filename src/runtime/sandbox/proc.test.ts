import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { childrenOf, innerPid, isRunning, kill, procRef, sleep } from './proc.js';

describe('proc', () => {
  it('names a live process by pid and start time', async () => {
    const me = await procRef(process.pid);
    expect(me?.pid).toBe(process.pid);
    expect(await isRunning(me)).toBe(true);
    // Same pid, another start time: a recycled pid is a stranger.
    expect(await isRunning({ pid: process.pid, start: (me?.start ?? 0) + 1 })).toBe(false);
    expect(await isRunning(undefined)).toBe(false);
    expect(await innerPid(process.pid)).toBe(process.pid); // not in a pid namespace
  });

  it('treats a zombie as dead', async () => {
    // `sleep 0` exits at once; its parent execs into `sleep 5`, which never reaps it.
    const parent = spawn('sh', ['-c', 'sleep 0 & exec sleep 5'], { stdio: 'ignore' });
    try {
      let zombie: number | undefined;
      for (let i = 0; i < 200 && zombie === undefined; i++) {
        await sleep(10);
        const [kid] = await childrenOf(parent.pid as number);
        if (kid !== undefined && (await procRef(kid)) === undefined) zombie = kid;
      }
      expect(zombie).toBeDefined();
      expect(await procRef(zombie as number)).toBeUndefined();
    } finally {
      parent.kill('SIGKILL');
    }
  });

  it('kill reports a process that is gone', () => {
    expect(kill(2 ** 22 + 1, 'SIGTERM')).toBe(false); // above pid_max's ceiling
  });
});
