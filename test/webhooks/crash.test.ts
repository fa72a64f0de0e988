/**
 * A dispatcher killed in the middle of an attempt (SIGKILL, in a process of its own):
 * the delivery stays claimed until its lease lapses, then pier sends the same message
 * again (same webhook-id, so the receiver can tell) and records one attempt. This pier
 * allows private targets (PIER_ALLOW_PRIVATE_TARGETS=1): its receiver is plain loopback.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { ServiceContext } from '../../src/services/context.js';
import { emitMailEvent } from '../../src/services/webhooks/events.js';
import { openStore } from '../../src/store/db.js';
import { restartTestPlatform, startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { startReceiver, type Receiver } from './receiver.js';

let tp: TestPlatform;
let receiver: Receiver;

beforeAll(async () => {
  receiver = await startReceiver();
  tp = await startTestPlatform({ allowPrivateTargets: true });
});
afterAll(async () => {
  await tp?.close();
  await receiver?.close();
});

it('resumes a delivery whose dispatcher died mid-attempt, exactly once more', async () => {
  const org = await tp.createOrg();
  const made = await tp.request('POST', '/v1/webhooks', {
    token: org.token,
    body: { url: `${receiver.url}/hold/crash`, events: ['email.sent'] },
  });
  expect(made.status).toBe(201);
  // Only the doomed dispatcher runs while the event is sent.
  await tp.platform.close();
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', 'test/webhooks/dispatcher-process.ts', tp.db.url, tp.dataDir, '1500'],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const store = openStore(tp.db.url);
  try {
    const [line] = (await once(child.stdout!, 'data')) as [Buffer];
    expect(String(line)).toContain('ready');
    const ctx = { db: store.db, clock: () => new Date() } as unknown as ServiceContext;
    const event = await emitMailEvent(ctx, org.id, { kind: 'email.sent', data: { n: 1 } });
    const [first] = await receiver.waitFor('/hold/crash');
    const { rows } = await store.pool.query(
      'SELECT locked_by, attempts FROM webhook_deliveries WHERE event_id = $1',
      [event.id],
    );
    expect(rows[0]).toMatchObject({ locked_by: expect.stringMatching(/^wd-/), attempts: 0 });
    child.kill('SIGKILL');
    await once(child, 'exit');
    receiver.release();

    tp = await restartTestPlatform(tp, { allowPrivateTargets: true });
    const [, second] = await receiver.waitFor('/hold/crash', 2);
    expect(second!.headers['webhook-id']).toBe(event.id);
    expect(second!.body).toBe(first!.body);
    const read = () =>
      tp.request('GET', `/v1/webhooks/${made.body.id}/deliveries`, { token: org.token });
    let list = await read();
    for (let i = 0; list.body[0]?.status === 'pending' && i < 100; i++) {
      await new Promise((r) => setTimeout(r, 50));
      list = await read();
    }
    expect(list.body).toHaveLength(1);
    expect(list.body[0]).toMatchObject({ status: 'succeeded', eventId: event.id });
    expect(list.body[0].attempts).toEqual([
      expect.objectContaining({ attempt: 1, outcome: 'succeeded', responseStatus: 200 }),
    ]);
    await new Promise((r) => setTimeout(r, 300));
    expect(receiver.to('/hold/crash')).toHaveLength(2);
  } finally {
    if (child.exitCode === null) child.kill('SIGKILL');
    await store.close();
  }
});
