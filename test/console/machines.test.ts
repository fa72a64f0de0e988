/**
 * Apps and machines in a real browser against a real pier with machines: create an app
 * and run a machine from a local registry image through the forms, watch its logs
 * arrive, type `echo hi` in the browser terminal and see `hi`, resize it, stop it; and a
 * person of another organization, who gets the same 404 page as for a missing machine
 * and no shell through the terminal's WebSocket.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { busyboxLayer, DEFAULT_APPLETS } from '../../src/runtime/images/build.test-helper.js';
import { canRunMachines, startMachineBed, type MachineBed } from '../machines/bed.js';
import { launchBrowser, screenshot, signIn, submitAndLoad, type TestBrowser } from './browser.js';
import { addPerson, ConsoleVisitor } from './console-client.js';

let bed: MachineBed;
let browser: TestBrowser;
let image: string;
let machineId: string;
const EMAIL = 'lin@example.com';
const OUTSIDER = 'outsider@example.com';
const LOG_LINE = 'hello from the console test';

beforeAll(async () => {
  if (!canRunMachines) return;
  [bed, browser] = await Promise.all([startMachineBed('cn', 200), launchBrowser()]);
  image = await bed.image('hello:1', {
    layers: [busyboxLayer([...DEFAULT_APPLETS, 'stty']), [{ path: 'www/' }]],
    config: { Cmd: ['/bin/sh', '-c', `echo ${LOG_LINE}; exec httpd -f -p 3000 -h /www`] },
  });
  await addPerson(bed.tp, bed.org.id, EMAIL);
  const other = await bed.tp.createOrg({ name: 'Outsiders' });
  await addPerson(bed.tp, other.id, OUTSIDER);
}, 120_000);
afterAll(async () => {
  await browser?.close();
  await bed?.close();
});

/** The text of the terminal's screen, one string per row (xterm draws spaces as NBSP). */
async function screenRows(page: import('playwright-core').Page): Promise<string[]> {
  return page.$$eval('.xterm-rows > div', (rows) =>
    rows.map((r) => (r.textContent ?? '').replace(/\u00a0/g, ' ')),
  );
}

describe.skipIf(!canRunMachines)('apps and machines in the browser', () => {
  it('creates an app and runs a machine from an image through the forms', async () => {
    const page = await browser.page();
    await signIn(page, bed.tp.url, EMAIL);
    await page.fill('form.create-app input[name=name]', 'console-web');
    await Promise.all([
      page.waitForURL('**/console/apps/console-web'),
      page.click('form.create-app button'),
    ]);

    await page.fill('form.run-machine input[name=image]', image);
    await submitAndLoad(page, 'form.run-machine button');
    // The table refreshes itself (htmx) until the machine runs.
    await page.waitForSelector('#machines td.state-running', { timeout: 60_000 });
    machineId = (await page.getAttribute('#machines tr[data-machine]', 'data-machine'))!;
    expect(machineId).toMatch(/^mch/);
    const row = page.locator(`#machines tr[data-machine="${machineId}"]`);
    await expect(row.locator('td').nth(3).textContent()).resolves.toMatch(/^10\.\d+\.\d+\.\d+$/);

    // Its console output arrives in the logs box, followed with the route's cursor.
    await page.waitForSelector(`#logs .line:has-text("${LOG_LINE}")`, { timeout: 20_000 });
    await screenshot(page, 'app');

    await page.goto(`${bed.tp.url}/console/apps`);
    await page.waitForSelector(`section[data-app="console-web"] tr[data-machine="${machineId}"]`);
    await screenshot(page, 'apps');
    await page.close();
  }, 120_000);

  it('opens a terminal in the browser: echo hi answers hi, and resize reaches the shell', async () => {
    const page = await browser.page();
    await signIn(page, bed.tp.url, EMAIL);
    await page.goto(`${bed.tp.url}/console/machines/${machineId}/terminal`);
    await page.waitForSelector('#terminal[data-state=open]', { timeout: 20_000 });
    await page.waitForSelector('.xterm-rows');
    await page.keyboard.type('echo hi\n');
    await page.waitForFunction(
      () =>
        [...document.querySelectorAll('.xterm-rows > div')].some(
          (r) => r.textContent?.trim() === 'hi',
        ),
      undefined,
      { timeout: 15_000 },
    );
    await screenshot(page, 'terminal');

    // The terminal fits its box; a smaller window is a smaller terminal for the shell too.
    const sizes = async () =>
      (await screenRows(page)).flatMap((r) => /S(\d+) (\d+)E/.exec(r)?.slice(1, 3) ?? []);
    const size = async () => {
      const seen = (await sizes()).length;
      await page.click('#terminal');
      await page.keyboard.type('echo S$(stty size)E\n', { delay: 20 });
      await expect
        .poll(async () => (await sizes()).length, { timeout: 10_000 })
        .toBeGreaterThan(seen);
      const all = await sizes();
      return { rows: Number(all[all.length - 2]), cols: Number(all[all.length - 1]) };
    };
    const wide = await size();
    expect(wide.cols).toBeGreaterThan(40);
    await page.setViewportSize({ width: 900, height: 700 });
    await page.waitForTimeout(500);
    const narrow = await size().catch(async (err) => {
      await screenshot(page, 'terminal-failed');
      throw err;
    });
    expect(narrow.cols).toBeLessThan(wide.cols);
    await page.setViewportSize({ width: 1280, height: 800 });
    await page.close();
  }, 60_000);

  it('stops and starts the machine with its buttons', async () => {
    const page = await browser.page();
    await signIn(page, bed.tp.url, EMAIL);
    await page.goto(`${bed.tp.url}/console/machines/${machineId}`);
    await screenshot(page, 'machine');
    const press = async (action: string) => {
      await submitAndLoad(page, `button[data-action=${action}]`);
      return (await bed.req('GET', `/v1/machines/${machineId}`)).body;
    };
    expect((await press('stop')).desiredState).toBe('stopped');
    expect((await press('start')).desiredState).toBe('running');

    await page.close();
  }, 90_000);

  it("shows another organization's machine exactly like a missing one", async () => {
    const page = await browser.page();
    await signIn(page, bed.tp.url, OUTSIDER);
    const theirs = await page.goto(`${bed.tp.url}/console/machines/${machineId}`);
    const theirsText = await page.locator('main').textContent();
    const missing = await page.goto(`${bed.tp.url}/console/machines/mch-never-was`);
    const missingText = await page.locator('main').textContent();
    expect(theirs!.status()).toBe(404);
    expect(missing!.status()).toBe(404);
    expect(theirsText!.replace(machineId, 'X')).toBe(missingText!.replace('mch-never-was', 'X'));
    const terminal = await page.goto(`${bed.tp.url}/console/machines/${machineId}/terminal`);
    expect(terminal!.status()).toBe(404);

    // The terminal's WebSocket relays the shell route's own refusal: no shell.
    const frame = await page.evaluate(
      (path) =>
        new Promise<string>((resolve) => {
          const ws = new window.WebSocket(`ws://${location.host}${path}`);
          ws.onmessage = (e) => resolve(String(e.data));
          ws.onclose = () => resolve('closed');
        }),
      `/console/ws/machines/${machineId}/exec`,
    );
    expect(JSON.parse(frame)).toMatchObject({ type: 'error', code: 'machine-not-found' });
    await page.close();
  }, 60_000);

  it("refuses the terminal's WebSocket from another origin, or without a session", async () => {
    const v = new ConsoleVisitor(bed.tp);
    expect((await v.signIn(EMAIL)).status).toBe(303);
    const url = `${bed.tp.url.replace('http', 'ws')}/console/ws/machines/${machineId}/exec`;
    const statusOf = (headers: Record<string, string>) =>
      new Promise<number>((resolve) => {
        const ws = new WebSocket(url, { headers });
        ws.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
        ws.on('open', () => {
          ws.close();
          resolve(101);
        });
        ws.on('error', () => resolve(-1));
      });
    expect(await statusOf({ cookie: v.cookie!, origin: 'http://evil.example' })).toBe(403);
    expect(await statusOf({ cookie: v.cookie! })).toBe(403);
    expect(await statusOf({ origin: bed.tp.url })).toBe(401);
    expect(await statusOf({ cookie: v.cookie!, origin: bed.tp.url })).toBe(101);
  });

  it('destroys the machine with its button, after asking', async () => {
    const page = await browser.page();
    await signIn(page, bed.tp.url, EMAIL);
    await page.goto(`${bed.tp.url}/console/machines/${machineId}`);
    // Declining the question leaves the machine alone; accepting destroys it.
    page.once('dialog', (d) => void d.dismiss());
    await page.click('button[data-action=destroy]');
    expect((await bed.req('GET', `/v1/machines/${machineId}`)).body.desiredState).toBe('running');
    page.once('dialog', (d) => void d.accept());
    await Promise.all([
      page.waitForURL('**/console/apps/console-web'),
      page.click('button[data-action=destroy]'),
    ]);
    const gone = await bed.req('GET', `/v1/machines/${machineId}`);
    expect(gone.status === 404 || gone.body.desiredState === 'deleted').toBe(true);
    await page.close();
  }, 60_000);
});
