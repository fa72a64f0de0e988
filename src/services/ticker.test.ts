import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { everyInterval } from './ticker.js';

describe('everyInterval', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  const log = { warn: vi.fn() };

  it('runs first after firstAfterMs, then every everyMs, until stopped', async () => {
    const tick = vi.fn(() => Promise.resolve());
    const stop = everyInterval(log, 'test', 1000, tick, 50);
    await vi.advanceTimersByTimeAsync(49);
    expect(tick).toHaveBeenCalledTimes(0);
    await vi.advanceTimersByTimeAsync(1);
    expect(tick).toHaveBeenCalledTimes(1);
    await vi.advanceTimersByTimeAsync(2000);
    expect(tick).toHaveBeenCalledTimes(3);
    stop();
    await vi.advanceTimersByTimeAsync(5000);
    expect(tick).toHaveBeenCalledTimes(3);
  });

  it('waits everyMs for the first run by default, and a stop before it prevents it', async () => {
    const tick = vi.fn(() => Promise.resolve());
    const stop = everyInterval(log, 'test', 1000, tick);
    await vi.advanceTimersByTimeAsync(999);
    expect(tick).toHaveBeenCalledTimes(0);
    stop();
    await vi.advanceTimersByTimeAsync(5000);
    expect(tick).toHaveBeenCalledTimes(0);
  });

  it('never runs twice at once, and logs a failure and goes on', async () => {
    let release: () => void = () => {};
    const tick = vi
      .fn<() => Promise<void>>()
      .mockImplementationOnce(() => new Promise<void>((r) => (release = r)))
      .mockImplementationOnce(() => Promise.reject(new Error('boom')))
      .mockImplementation(() => Promise.resolve());
    const stop = everyInterval(log, 'slow', 100, tick);
    await vi.advanceTimersByTimeAsync(350); // the first run is still going: no second one
    expect(tick).toHaveBeenCalledTimes(1);
    release();
    await vi.advanceTimersByTimeAsync(100);
    expect(tick).toHaveBeenCalledTimes(2);
    expect(log.warn).toHaveBeenCalledWith(expect.anything(), 'slow failed');
    await vi.advanceTimersByTimeAsync(100);
    expect(tick).toHaveBeenCalledTimes(3);
    stop();
  });
});
