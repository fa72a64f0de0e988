import { describe, expect, it } from 'vitest';
import { runTool, ToolRunError } from './spawner.js';

const opts = { env: { PATH: '/usr/bin:/bin' }, timeoutMs: 5_000, maxBuffer: 1 << 20 };

/** Waits until the helper process answers: the first commands run directly while it starts. */
async function helperPid(): Promise<number> {
  for (let i = 0; i < 200; i++) {
    const { stdout } = await runTool('sh', ['-c', 'echo $PPID'], opts);
    const ppid = Number(stdout.trim());
    if (ppid !== process.pid) return ppid;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error('the spawner process never answered');
}

describe('spawner', () => {
  it('runs commands from its own small process once that is up, with their output and input', async () => {
    const helper = await helperPid();
    expect(helper).not.toBe(process.pid);
    const comm = await runTool('cat', [`/proc/${helper}/cmdline`], opts);
    expect(comm.stdout).toContain('spawner-child');
    expect((await runTool('cat', [], { ...opts, input: 'hello\n' })).stdout).toBe('hello\n');
  });

  it('fails like execFile: exit status, stderr, a missing binary, a timeout', async () => {
    const failed = await runTool('sh', ['-c', 'echo oops >&2; exit 3'], opts).catch((e) => e);
    expect(failed).toBeInstanceOf(ToolRunError);
    expect(failed).toMatchObject({ code: 3, stderr: 'oops\n' });
    const missing = await runTool('/nonexistent/tool', [], opts).catch((e) => e);
    expect(missing).toMatchObject({ code: 'ENOENT' });
    const slow = await runTool('sleep', ['5'], { ...opts, timeoutMs: 100 }).catch((e) => e);
    expect(slow).toMatchObject({ killed: true, signal: 'SIGTERM' });
  });

  it('says so when the helper dies with a command in hand, and starts a new one after', async () => {
    const helper = await helperPid();
    const inHand = runTool('sleep', ['2'], opts).catch((e: Error) => e);
    await new Promise((r) => setTimeout(r, 100));
    process.kill(helper, 'SIGKILL');
    expect(((await inHand) as Error).message).toMatch(/spawner process ended/);
    expect((await runTool('echo', ['still'], opts)).stdout).toBe('still\n'); // directly meanwhile
    expect(await helperPid()).not.toBe(helper);
  });
});
