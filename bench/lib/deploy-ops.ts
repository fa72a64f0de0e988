/**
 * Deploy steps through pier's API for the deploy benchmarks (the CLI's `pier deploy`
 * takes these same steps): a source upload, a build polled until it ends, a deploy polled
 * until it ends, and GETs through the proxy until a page shows. Polling is every 25 ms, so
 * a step's time is at most that much late.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { MachinePier } from './machine-pier.js';

const POLL_MS = 25;

/** `POST /v1/apps/:app/sources` with a gzip'd tar; answers the source's id. */
export async function uploadSource(b: MachinePier, app: string, tgz: Buffer): Promise<string> {
  const res = await fetch(`${b.url}/v1/apps/${app}/sources`, {
    method: 'POST',
    headers: { authorization: `Bearer ${b.org.token}`, 'content-type': 'application/gzip' },
    body: new Uint8Array(tgz),
  });
  const text = await res.text();
  if (res.status !== 201) throw new Error(`source upload answered ${res.status}: ${text}`);
  return (JSON.parse(text) as { id: string }).id;
}

/** `POST /v1/apps/:app/builds`, then `GET /v1/builds/:id` until `done` (or throws). */
export async function buildAndWait(b: MachinePier, app: string, source: string): Promise<any> {
  const made = await b.api('POST', `/v1/apps/${app}/builds`, { source }, 202);
  const deadline = Date.now() + 300_000;
  for (;;) {
    const build = await b.api('GET', `/v1/builds/${made.id}`);
    if (build.state === 'done') return build;
    if (build.state === 'failed') {
      throw new Error(`build ${made.id} failed: ${build.error}\n${await buildLog(b, made.id)}`);
    }
    if (Date.now() > deadline) throw new Error(`build ${made.id} still ${build.state}`);
    await sleep(POLL_MS);
  }
}

async function buildLog(b: MachinePier, id: string): Promise<string> {
  const res = await fetch(`${b.url}/v1/builds/${id}/logs`, {
    headers: { authorization: `Bearer ${b.org.token}` },
  });
  return (await res.text()).slice(-2000);
}

/**
 * `POST /v1/apps/:app/deploys`, then `GET /v1/deploys/:id` until `done` (or throws).
 * `steps` gets each status and step the polls saw, with the ms since the POST, which is
 * where a deploy's time went.
 */
export async function deployAndWait(
  b: MachinePier,
  app: string,
  body: Record<string, unknown>,
  steps: string[] = [],
): Promise<any> {
  const start = Date.now();
  const made = await b.api('POST', `/v1/apps/${app}/deploys`, body, 202);
  const deadline = Date.now() + 300_000;
  let seen = '';
  for (;;) {
    const d = await b.api('GET', `/v1/deploys/${made.id}`);
    const now = `${d.status}${d.step ? ` (${d.step})` : ''}`;
    if (now !== seen) steps.push(`${Date.now() - start} ms ${(seen = now)}`);
    if (d.status === 'done') return d;
    if (d.status === 'error') throw new Error(`deploy ${made.id} ended error: ${d.error}`);
    if (Date.now() > deadline) throw new Error(`deploy ${made.id} still ${d.status} (${d.step})`);
    await sleep(POLL_MS);
  }
}

/**
 * Calls `get` until it answers 200 with `content` (a new connection each, 1 ms apart, as
 * `firstOk` waits); answers the number of tries. An older page (the release before) is
 * waited past, not an error.
 */
export async function untilServes(
  get: () => Promise<{ status: number; text: string }>,
  content: string,
  timeoutMs = 30_000,
): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  for (let tries = 1; ; tries++) {
    try {
      const r = await get();
      if (r.status === 200 && r.text === content) return tries;
      last = `${r.status} ${r.text.slice(0, 200)}`;
    } catch (err) {
      last = (err as Error).message;
    }
    if (Date.now() > deadline)
      throw new Error(`no 200 of the page within ${timeoutMs} ms (last: ${last})`);
    await sleep(1);
  }
}
