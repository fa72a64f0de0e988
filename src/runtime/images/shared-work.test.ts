import { describe, expect, it } from 'vitest';
import { SharedWork } from './shared-work.js';

const tick = () => new Promise((r) => setTimeout(r, 5));

describe('SharedWork', () => {
  it('runs one job per key and fans progress out to every caller', async () => {
    const work = new SharedWork<number, number>();
    let runs = 0;
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const job = async (_s: AbortSignal, progress: (p: number) => void) => {
      runs++;
      await gate;
      progress(1);
      return 42;
    };
    const seen: number[][] = [[], []];
    const a = work.run('k', job, { onProgress: (p) => seen[0]!.push(p) });
    const b = work.run('k', job, { onProgress: (p) => seen[1]!.push(p) });
    await tick();
    release();
    expect(await Promise.all([a, b])).toEqual([42, 42]);
    expect(runs).toBe(1);
    expect(seen).toEqual([[1], [1]]);
    expect(work.keys()).toEqual([]);
  });

  it('answers a leaving caller at once and aborts the job only when all have left', async () => {
    const work = new SharedWork<string>();
    let jobSignal: AbortSignal | undefined;
    const job = (signal: AbortSignal) =>
      new Promise<string>((resolve, reject) => {
        jobSignal = signal;
        signal.addEventListener('abort', () => reject(signal.reason));
        setTimeout(() => resolve('done'), 100);
      });
    const c1 = new AbortController();
    const c2 = new AbortController();
    const first = work.run('k', job, { signal: c1.signal });
    const second = work.run('k', job, { signal: c2.signal });
    c1.abort(new Error('first left'));
    await expect(first).rejects.toThrow('first left');
    expect(jobSignal?.aborted).toBe(false);
    c2.abort(new Error('second left'));
    await expect(second).rejects.toThrow('second left');
    expect(jobSignal?.aborted).toBe(true);
    // A new caller gets a new job.
    expect(await work.run('k', async () => 'fresh')).toBe('fresh');
  });

  it('shares failures and forgets them', async () => {
    const work = new SharedWork<void>();
    const failing = async () => {
      await tick();
      throw new Error('boom');
    };
    await expect(Promise.all([work.run('k', failing), work.run('k', failing)])).rejects.toThrow(
      'boom',
    );
    await expect(work.run('k', async () => undefined)).resolves.toBeUndefined();
  });
});
