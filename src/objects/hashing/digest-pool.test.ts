import { createHash, randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import {
  OFFLOAD_MIN_BYTES,
  digestPoolState,
  startDigests,
  stopDigestWorkers,
  type DigestTask,
} from './digest-pool.js';
import { DigestSet, type DigestAlgorithm } from './running.js';

const ALL: DigestAlgorithm[] = ['md5', 'sha256', 'sha1', 'crc32', 'crc32c', 'crc64nvme'];

/** Feeds `body` in uneven pieces, as a socket would deliver it. */
function feed(task: DigestTask, body: Buffer): void {
  for (let at = 0, i = 0; at < body.length; i++) {
    const n = [1, 65_536, 777, 300_000, 16_384][i % 5]!;
    task.update(body.subarray(at, at + n));
    at += n;
  }
}

function inline(algorithms: DigestAlgorithm[], body: Buffer): Map<DigestAlgorithm, string> {
  const set = new DigestSet(algorithms);
  set.update(body);
  return hex(set.digests());
}

function hex(digests: Map<DigestAlgorithm, Buffer>): Map<DigestAlgorithm, string> {
  return new Map([...digests].map(([a, d]) => [a, d.toString('hex')]));
}

describe('digest pool', () => {
  afterAll(() => stopDigestWorkers());

  it('hashes a small body inline, with the same digests as node:crypto', async () => {
    const body = randomBytes(1000);
    const task = startDigests(['md5', 'sha256'], body.length);
    feed(task, body);
    const digests = hex(await task.finish());
    expect(digests.get('md5')).toBe(createHash('md5').update(body).digest('hex'));
    expect(digests.get('sha256')).toBe(createHash('sha256').update(body).digest('hex'));
  });

  it('hashes a large body on a worker, every algorithm, the same as inline', async () => {
    // feed() hands over views on parts of one buffer, which are copied before posting.
    const body = randomBytes(5 * 1024 * 1024 + 12_345);
    const task = startDigests(ALL, body.length);
    feed(task, body);
    expect(hex(await task.finish())).toEqual(inline(ALL, body));
    expect(digestPoolState().workers).toBeGreaterThan(0);
  });

  it('starts no worker for a large body with nothing to hash', async () => {
    await stopDigestWorkers();
    const task = startDigests([], 8 * 1024 * 1024);
    feed(task, randomBytes(OFFLOAD_MIN_BYTES * 2));
    expect((await task.finish()).size).toBe(0);
    expect(digestPoolState().workers).toBe(0);
  });

  it('offloads a body of unknown size, and one of exactly the threshold', async () => {
    for (const size of [undefined, OFFLOAD_MIN_BYTES]) {
      const body = randomBytes(OFFLOAD_MIN_BYTES);
      const task = startDigests(['md5'], size);
      feed(task, body);
      expect(hex(await task.finish())).toEqual(inline(['md5'], body));
    }
  });

  it('keeps many concurrent bodies apart', async () => {
    // 40 bodies of 2.5 MiB fed in turns, as 40 uploads arrive.
    const bodies = Array.from({ length: 40 }, () => randomBytes(2.5 * 1024 * 1024));
    const tasks = bodies.map((b) => startDigests(['md5', 'crc32'], b.length));
    for (let at = 0; at < bodies[0]!.length; at += 256 * 1024) {
      tasks.forEach((t, i) => t.update(bodies[i]!.subarray(at, at + 256 * 1024)));
    }
    const results = await Promise.all(tasks.map((t) => t.finish()));
    results.forEach((r, i) => expect(hex(r)).toEqual(inline(['md5', 'crc32'], bodies[i]!)));
  });

  it('forgets an abandoned body, and hashes the next one right', async () => {
    const task = startDigests(['md5']);
    feed(task, randomBytes(3 * 1024 * 1024 + 5));
    task.abort();
    const next = startDigests(['md5']);
    const body = randomBytes(2 * 1024 * 1024);
    feed(next, body);
    expect(hex(await next.finish())).toEqual(inline(['md5'], body));
  });

  it('fails the bodies of a worker that ends, and starts a new one for the next', async () => {
    const task = startDigests(['md5']);
    feed(task, randomBytes(2 * 1024 * 1024));
    await stopDigestWorkers();
    await expect(task.finish()).rejects.toThrow(/digest worker/);
    expect(digestPoolState().workers).toBe(0);

    const body = randomBytes(1024 * 1024);
    const next = startDigests(['sha256']);
    feed(next, body);
    expect(hex(await next.finish())).toEqual(inline(['sha256'], body));
  });
});
