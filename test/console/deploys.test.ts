/**
 * An app's deploys page in a real browser against a real pier with the real builder: a
 * build's log arriving live while it builds (followed through the log route), deploying a
 * build with its button, the releases it makes, and "Roll back to v1" leading to the
 * rollback's deploy; another organization's person sees a 404 page like a missing app's,
 * and a rollback posted without the session's CSRF token is refused.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { busyboxLayer, DEFAULT_APPLETS } from '../../src/runtime/images/build.test-helper.js';
import { sourceArchive, uploadSource } from '../builds/archive.js';
import { canRunMachines, startMachineBed, type MachineBed } from '../machines/bed.js';
import { launchBrowser, screenshot, signIn, submitAndLoad, type TestBrowser } from './browser.js';
import { addPerson, ConsoleVisitor } from './console-client.js';

let bed: MachineBed;
let browser: TestBrowser;
let base: string;
const EMAIL = 'ada@example.com';
const OUTSIDER = 'mallory@example.com';
const APP = 'shop';

/** A site whose build takes a few seconds (so its log is followed), serving `content`. */
function site(content: string): Record<string, string> {
  return {
    Dockerfile: [
      `FROM ${base}`,
      'RUN echo step-one && sleep 3 && echo step-two',
      'COPY index.html /srv/index.html',
      'CMD ["httpd", "-f", "-p", "8080", "-h", "/srv"]',
    ].join('\n'),
    'index.html': content,
  };
}

/** Uploads and starts a build through the API; answers the (queued) build. */
async function startBuild(content: string) {
  const up = await uploadSource(bed.tp.url, bed.org.token, APP, sourceArchive(site(content)));
  expect(up.status).toBe(201);
  const made = await bed.req('POST', `/v1/apps/${APP}/builds`, { source: up.body.id });
  expect(made.status).toBe(202);
  return made.body;
}

async function waitBuild(id: string) {
  const res = await fetch(`${bed.tp.url}/v1/builds/${id}/logs?follow=1`, {
    headers: { authorization: `Bearer ${bed.org.token}` },
    signal: AbortSignal.timeout(90_000),
  });
  await res.text();
  return (await bed.req('GET', `/v1/builds/${id}`)).body;
}

beforeAll(async () => {
  if (!canRunMachines) return;
  [bed, browser] = await Promise.all([
    startMachineBed('cd', 130, { buildTimeoutS: 60, buildDiskGb: 1, buildMemoryMb: 256 }),
    launchBrowser(),
  ]);
  base = await bed.image('site-base:1', {
    layers: [busyboxLayer([...DEFAULT_APPLETS]), [{ path: 'srv/', type: 'dir' }]],
    config: { Cmd: ['/bin/sh'] },
  });
  expect((await bed.req('POST', '/v1/apps', { name: APP })).status).toBe(201);
  await addPerson(bed.tp, bed.org.id, EMAIL);
  const other = await bed.tp.createOrg({ name: 'Elsewhere' });
  await addPerson(bed.tp, other.id, OUTSIDER);
}, 180_000);
afterAll(async () => {
  await browser?.close();
  await bed?.close();
}, 120_000);

describe.skipIf(!canRunMachines)('the deploys page in the browser', () => {
  let firstBuild: any;

  it('shows a build with its log following live until the build is done', async () => {
    const page = await browser.page();
    await signIn(page, bed.tp.url, EMAIL);
    firstBuild = await startBuild('version one');
    await page.goto(`${bed.tp.url}/console/apps/${APP}`);
    await submitAndLoad(page, `a[href="/console/apps/${APP}/deploys"]`);
    expect(page.url()).toContain(`/console/apps/${APP}/deploys`);
    const row = page.locator(`#builds tr[data-build="${firstBuild.id}"]`);
    await row.waitFor();
    // Served while the build runs: the page follows the log route on.
    expect(await page.getAttribute('#build-log', 'data-state')).toBe('following');
    await page.waitForSelector('#build-log[data-state=ended]', { timeout: 90_000 });
    const log = await page.textContent('#build-log');
    expect(log).toContain('step-one');
    expect(log).toContain('step-two');
    expect(log).toContain('COPY index.html /srv/index.html');
    // The builds table refreshed itself to the build's end.
    await row.locator('td.state-done').waitFor({ timeout: 10_000 });
    await screenshot(page, 'deploys-build');

    // Reloaded after the end, the log is served whole and not followed.
    await page.reload();
    expect(await page.getAttribute('#build-log', 'data-state')).toBe('ended');
    expect(await page.textContent('#build-log')).toContain('step-two');
    await page.close();
  }, 150_000);

  it('deploys builds with their button, lists releases, and rolls back to v1', async () => {
    // The first deploy names the machine config (the port); later ones keep the live one.
    const first = await bed.req('POST', `/v1/apps/${APP}/deploys`, {
      image: `build:${firstBuild.id}`,
      config: { internalPort: 8080 },
    });
    expect(first.status, JSON.stringify(first.body)).toBe(202);
    const second = await waitBuild((await startBuild('version two')).id);
    expect(second.state).toBe('done');

    const page = await browser.page();
    await signIn(page, bed.tp.url, EMAIL);
    await page.goto(`${bed.tp.url}/console/apps/${APP}/deploys`);
    // The first deploy finishes (the table follows it), making release v1.
    await page.waitForSelector(`#deploys tr[data-deploy="${first.body.id}"] td.state-done`, {
      timeout: 90_000,
    });
    await page.reload();
    await submitAndLoad(page, `#builds tr[data-build="${second.id}"] form.deploy-build button`);
    const deployId = new URL(page.url()).searchParams.get('deploy');
    expect(deployId).toBeTruthy();
    await page.waitForSelector(`#deploys tr.current[data-deploy="${deployId}"] td.state-done`, {
      timeout: 90_000,
    });
    await page.reload();
    expect(await page.textContent('tr[data-version="2"] td.state')).toBe('live');
    expect(await page.textContent('tr[data-version="1"] td.state')).toBe('superseded');
    const button = page.locator('form.rollback button');
    expect(await button.count()).toBe(1);
    expect((await button.textContent())?.trim()).toBe('Roll back to v1');
    await screenshot(page, 'deploys-releases');

    await submitAndLoad(page, 'form.rollback button');
    const rollbackId = new URL(page.url()).searchParams.get('deploy')!;
    const current = page.locator(`#deploys tr.current[data-deploy="${rollbackId}"]`);
    expect(await current.textContent()).toContain('rollback to v1');
    await current.locator('td.state-done').waitFor({ timeout: 90_000 });
    await page.reload();
    expect(await page.textContent('tr[data-version="3"] td.state')).toBe('live');
    const releases = (await bed.req('GET', `/v1/apps/${APP}/releases`)).body;
    expect(releases[0]).toMatchObject({ version: 3, status: 'live', build: firstBuild.id });
    await screenshot(page, 'deploys-rolled-back');
    await page.close();
  }, 300_000);

  it("shows another organization's app and build log exactly like missing ones", async () => {
    const page = await browser.page();
    await signIn(page, bed.tp.url, OUTSIDER);
    const theirs = await page.goto(`${bed.tp.url}/console/apps/${APP}/deploys`);
    const theirsText = await page.locator('main').textContent();
    const missing = await page.goto(`${bed.tp.url}/console/apps/never-was/deploys`);
    const missingText = await page.locator('main').textContent();
    expect(theirs!.status()).toBe(404);
    expect(missing!.status()).toBe(404);
    expect(theirsText!.replace(APP, 'X')).toBe(missingText!.replace('never-was', 'X'));
    const log = await page.goto(`${bed.tp.url}/console/builds/${firstBuild.id}/log`);
    expect(log!.status()).toBe(404);
    expect(await page.textContent('body')).not.toContain('step-one');
    await page.close();
  }, 60_000);

  it('refuses a rollback or deploy posted without the CSRF token or from another origin', async () => {
    const v = new ConsoleVisitor(bed.tp);
    expect((await v.signIn(EMAIL)).status).toBe(303);
    const csrf = await v.csrf();
    const before = (await bed.req('GET', `/v1/apps/${APP}/deploys`)).body?.length;
    expect((await v.post(`/console/apps/${APP}/deploys/rollback`, { version: '1' })).status).toBe(
      403,
    );
    expect(
      (
        await v.post(
          `/console/apps/${APP}/deploys`,
          { _csrf: csrf, image: `build:${firstBuild.id}` },
          { origin: 'http://evil.example' },
        )
      ).status,
    ).toBe(403);
    expect((await bed.req('GET', `/v1/apps/${APP}/deploys`)).body?.length).toBe(before);
  });
});
