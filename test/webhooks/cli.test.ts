/** `pier webhooks`: create (the secret once), list, deliveries, delete, against a real pier. */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { pierWith, startCliBed, type CliBed } from '../cli/run-cli.js';
import { startReceiver, type Receiver } from './receiver.js';

let bed: CliBed;
let receiver: Receiver;
const pier = pierWith(() => bed.env);

beforeAll(async () => {
  receiver = await startReceiver();
  bed = await startCliBed({ trustedRegistries: [`127.0.0.1:${receiver.port}`] });
});
afterAll(async () => {
  await bed?.tp.close();
  await bed?.tmp.remove();
  await receiver?.close();
});

it('creates, lists, shows deliveries and deletes a webhook', async () => {
  const url = `${receiver.url}/ok/cli`;
  const made = await pier([
    'webhooks',
    'create',
    url,
    '--event',
    'email.sent',
    '--event',
    'email.failed',
  ]);
  expect(made.stderr).toBe('');
  expect(made.code).toBe(0);
  const id = /Created webhook (wh-\S+) for email\.sent, email\.failed\./.exec(made.stdout)?.[1];
  expect(id).toBeDefined();
  expect(made.stdout).toMatch(/Signing secret \(shown once\): whsec_\S+\n$/);

  const list = await pier(['webhooks', 'list']);
  expect(list.stdout).toMatch(/^ID\s+URL\s+EVENTS\s+STATE\s+CREATED\n/);
  expect(list.stdout).toContain(`${id}  ${url}`);

  await bed.tp.admin('POST', `/admin/v1/orgs/${bed.org.id}/mail-events`, {
    kind: 'email.failed',
    data: {},
  });
  await receiver.waitFor('/ok/cli');
  let json = await pier(['webhooks', 'deliveries', id!, '--json', '--limit', '5']);
  for (let i = 0; JSON.parse(json.stdout)[0]?.status !== 'succeeded' && i < 50; i++) {
    await new Promise((r) => setTimeout(r, 50));
    json = await pier(['webhooks', 'deliveries', id!, '--json']);
  }
  expect(JSON.parse(json.stdout)[0]).toMatchObject({ type: 'email.failed', status: 'succeeded' });
  const table = await pier(['webhooks', 'deliveries', id!]);
  expect(table.stdout).toMatch(/email\.failed\s+succeeded\s+1\s+200/);

  const bad = await pier(['webhooks', 'create', 'http://10.1.1.1/', '--event', 'email.sent']);
  expect(bad.code).not.toBe(0);
  expect(bad.stderr).toMatch(/url/);

  expect((await pier(['webhooks', 'delete', id!])).stdout).toBe(`Deleted webhook ${id}.\n`);
  expect((await pier(['webhooks', 'list'])).stdout).toContain('No webhooks.');
});
