/**
 * The console's webhooks page over real HTTP: create (the secret in that answer only),
 * the list, a webhook's deliveries after a mail event, delete; another organization's
 * webhook is the same page as a missing one.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';
import { addPerson, ConsoleVisitor } from '../console/console-client.js';
import { startReceiver, type Receiver } from './receiver.js';

let tp: TestPlatform;
let org: TestOrg;
let receiver: Receiver;
let v: ConsoleVisitor;
let csrf: string;

beforeAll(async () => {
  receiver = await startReceiver();
  tp = await startTestPlatform({ trustedRegistries: [`127.0.0.1:${receiver.port}`] });
  org = await tp.createOrg();
  await addPerson(tp, org.id, 'hooks@example.com');
  v = new ConsoleVisitor(tp);
  expect((await v.signIn('hooks@example.com')).status).toBe(303);
  csrf = await v.csrf();
});
afterAll(async () => {
  await tp?.close();
  await receiver?.close();
});

it('creates, lists, shows deliveries and deletes webhooks', async () => {
  const url = `${receiver.url}/ok/console`;
  const made = await v.post(
    '/console/webhooks',
    { _csrf: csrf, url, 'email.sent': 'on', 'email.bounced': 'on' },
    { origin: tp.url, 'hx-request': 'true' },
  );
  expect(made.status).toBe(200);
  const secret = /(whsec_[A-Za-z0-9+/=]+)/.exec(made.text)?.[1];
  expect(secret).toBeDefined();
  const [hook] = (await tp.request('GET', '/v1/webhooks', { token: org.token })).body;
  expect(hook).toMatchObject({ url, events: ['email.sent', 'email.bounced'] });

  const list = await v.get('/console/webhooks');
  expect(list.text).toContain(url);
  expect(list.text).not.toContain(secret!);

  const bad = await v.post('/console/webhooks', { _csrf: csrf, url: 'http://10.0.0.1/' });
  expect(bad.status).toBe(400);
  expect(bad.text).toContain('bad-request');

  await tp.admin('POST', `/admin/v1/orgs/${org.id}/mail-events`, { kind: 'email.sent', data: {} });
  await receiver.waitFor('/ok/console');
  let page = await v.get(`/console/webhooks/${hook.id}`);
  for (let i = 0; !page.text.includes('succeeded') && i < 50; i++) {
    await new Promise((r) => setTimeout(r, 50));
    page = await v.get(`/console/webhooks/${hook.id}`);
  }
  expect(page.text).toContain('email.sent');
  expect(page.text).toContain('succeeded');

  const other = await tp.createOrg();
  const theirs = await tp.request('POST', '/v1/webhooks', {
    token: other.token,
    body: { url: `${receiver.url}/ok/theirs`, events: ['email.sent'] },
  });
  const foreign = await v.get(`/console/webhooks/${theirs.body.id}`);
  const missing = await v.get('/console/webhooks/wh-missing');
  expect(foreign.status).toBe(404);
  expect(missing.status).toBe(404);

  const del = await v.post(`/console/webhooks/${hook.id}/delete`, { _csrf: csrf });
  expect(del.status).toBe(303);
  expect((await tp.request('GET', '/v1/webhooks', { token: org.token })).body).toEqual([]);
});
