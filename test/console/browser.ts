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

const STEP_TIMEOUT_MS = 10_000;

export interface TestBrowser {
  context: BrowserContext;
  /** A new tab; messages the page logs to its console are kept for failures. */
  page(): Promise<Page>;
  close(): Promise<void>;
}

/** `args`: chromium flags beyond the defaults (`--host-resolver-rules=…` for names). */
export async function launchBrowser(args: string[] = []): Promise<TestBrowser> {
  const profile = await mkdtemp(path.join(os.tmpdir(), 'pier-chromium-'));
  let context: BrowserContext;
  try {
    context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: [...FLAGS, ...args],
      viewport: { width: 1280, height: 800 },
    });
    // A step that hangs fails on its own, naming itself, well inside the test's timeout.
    context.setDefaultTimeout(STEP_TIMEOUT_MS);
    context.setDefaultNavigationTimeout(STEP_TIMEOUT_MS);
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
  await submitAndLoad(page, 'button[type=submit]');
}

/**
 * Clicks a button that posts a form and waits for the page the post leads to. Waiting
 * for 'load' alone races: the page being left is already loaded, so the wait could end
 * before the browser has even sent the form.
 */
export async function submitAndLoad(page: Page, selector: string): Promise<void> {
  const navigated = page.waitForEvent('framenavigated', (frame) => frame === page.mainFrame());
  await page.click(selector);
  await navigated;
  await page.waitForLoadState('load');
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
