/**
 * A real browser for the console's end-to-end tests: Debian's chromium (installed by
 * scripts/setup.sh) driven by playwright-core, launched once per test file with a fresh
 * profile, and removed with it. Screenshots go to test-artifacts/console/ (gitignored).
 */
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { PASSWORD } from './console-client.js';

export const CHROMIUM = '/usr/bin/chromium';
export const ARTIFACTS = path.resolve('test-artifacts', 'console');

// Without the background-networking flags chromium stalls on a closed network.
const FLAGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export interface TestBrowser {
  context: BrowserContext;
  /** A new tab; messages the page logs to its console are kept for failures. */
  page(): Promise<Page>;
  close(): Promise<void>;
}

export async function launchBrowser(): Promise<TestBrowser> {
  const profile = await mkdtemp(path.join(os.tmpdir(), 'pier-chromium-'));
  let context: BrowserContext;
  try {
    context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: FLAGS,
      viewport: { width: 1280, height: 800 },
    });
  } catch (err) {
    await rm(profile, { recursive: true, force: true });
    throw err;
  }
  return {
    context,
    page: () => context.newPage(),
    async close() {
      await context.close().catch(() => undefined);
      await rm(profile, { recursive: true, force: true });
    },
  };
}

/** Signs in afresh through the form (any earlier session of the browser is dropped). */
export async function signIn(page: Page, base: string, email: string, password = PASSWORD) {
  await page.context().clearCookies();
  await page.goto(`${base}/console/sign-in`);
  await fillSignIn(page, email, password);
}

export async function fillSignIn(page: Page, email: string, password = PASSWORD) {
  await page.fill('input[name=email]', email);
  await page.fill('input[name=password]', password);
  await Promise.all([page.waitForLoadState('load'), page.click('button[type=submit]')]);
}

export async function screenshot(page: Page, name: string): Promise<void> {
  await mkdir(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), fullPage: true });
}

/** CSP violations the page reported (there should be none of ours). */
export function collectCspViolations(page: Page): string[] {
  const seen: string[] = [];
  page.on('console', (msg) => {
    if (/Content Security Policy/i.test(msg.text())) seen.push(msg.text());
  });
  return seen;
}
