import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { descendants, parsePpid } from './proc-tree.js';

describe('parsePpid', () => {
  it('reads the field after the command name, whatever the name holds', () => {
    expect(parsePpid('42 (postgres) S 7 42 42 0 -1')).toBe(7);
    expect(parsePpid('43 (a) b (c) ) R 9 43 43 0 -1')).toBe(9);
    expect(parsePpid('44 (with space) S 1 44')).toBe(1);
    expect(parsePpid('garbage')).toBeUndefined();
  });
});

describe('descendants', () => {
  const kill: number[] = [];
  afterEach(() => {
    for (const pid of kill.splice(0)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone already
      }
    }
  });

  it('finds children and grandchildren of a real process, not itself', async () => {
    // A node that starts a sleeping grandchild and prints its pid.
    const script = `
      const { spawn } = require('node:child_process');
      const c = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
      console.log(c.pid);
      setInterval(() => {}, 1000);
    `;
    const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'ignore'] });
    const grandchild = await new Promise<number>((resolve) =>
      child.stdout.once('data', (d: Buffer) => resolve(Number(d.toString().trim()))),
    );
    kill.push(grandchild, child.pid!);

    const mine = await descendants(process.pid);
    expect(mine).toContain(child.pid);
    expect(mine).toContain(grandchild);
    expect(mine.indexOf(child.pid!)).toBeLessThan(mine.indexOf(grandchild));
    expect(await descendants(child.pid!)).toEqual([grandchild]);
    expect(await descendants(grandchild)).toEqual([]);
    const stat = await readFile(`/proc/${grandchild}/stat`, 'utf8');
    expect(parsePpid(stat)).toBe(child.pid);
  });
});
