/**
 * The steps `pier deploy` and `pier rollback` are made of (CONTRACT 7): uploading a
 * packed source with a meter, streaming a build's log until it ends, and following a
 * deploy until it is `done` or `error`, printing each new step it reports.
 */
import { createReadStream } from 'node:fs';
import { type ApiClient, apiPath, errorOfResponse, rawFetch } from './api-client.js';
import { sendStream } from './byte-streams.js';
import { CliError } from './errors.js';
import { type Credentials, sleep, transient } from './machines-common.js';
import { Progress, formatBytes } from './progress.js';
import type { PackedSource } from './source-pack.js';
import type { Build, Deploy, Source } from './types.js';

/** How often a deploy (or a build whose log broke off) is read while followed. */
const POLL_MS = 500;
/** How long following may see the API unreachable (a restarting server) before giving up. */
const OUTAGE_LIMIT_MS = 60_000;

/**
 * POSTs the archive as the app's source, streamed from its file with a known length (so
 * an oversized one is refused before it is sent), and checks the server hashed the same
 * bytes.
 */
export async function uploadSource(
  creds: Credentials,
  app: string,
  packed: PackedSource,
  showProgress: boolean,
): Promise<Source> {
  const progress = new Progress({
    label: `upload ${app}`,
    total: packed.size,
    enabled: showProgress,
  });
  const headers = {
    authorization: `Bearer ${creds.apiKey}`,
    'content-type': 'application/gzip',
    accept: 'application/json',
  };
  const res = await sendStream(
    (url, init) => rawFetch(creds.apiUrl, url, init),
    'POST',
    `${creds.apiUrl}${apiPath`/v1/apps/${app}/sources`}`,
    headers,
    { stream: createReadStream(packed.file), size: packed.size },
    progress,
    errorOfResponse,
  );
  const source = (await res.json()) as Source;
  if (source.sha256 !== packed.sha256) {
    throw new CliError(
      `the server stored other bytes than were sent (sha256 ${source.sha256}, sent ${packed.sha256}); deploy again`,
    );
  }
  return source;
}

/** One line saying what was uploaded. */
export function describeSource(source: Source, packed: PackedSource): string {
  const from = packed.ignoreFile ? `, ${packed.ignoreFile} honoured` : '';
  return `Uploaded source ${source.id}: ${source.files} files, ${formatBytes(source.sizeBytes)}${from} (sha256 ${source.sha256.slice(0, 12)}).`;
}

/**
 * Writes a build's log to `out` as it comes (`follow`: until the build ends). Answers
 * false when the stream broke off before its end (the API restarting, say).
 */
export async function streamBuildLog(
  creds: Credentials,
  id: string,
  follow: boolean,
  out: NodeJS.WritableStream,
): Promise<boolean> {
  const url = `${creds.apiUrl}${apiPath`/v1/builds/${id}/logs`}${follow ? '?follow=1' : ''}`;
  const res = await rawFetch(creds.apiUrl, url, {
    headers: { authorization: `Bearer ${creds.apiKey}` },
  });
  if (!res.ok) throw await errorOfResponse(res);
  try {
    for await (const chunk of res.body ?? []) out.write(chunk);
  } catch {
    return false;
  }
  return true;
}

/**
 * Streams a build's log to `out` until the build ends, then answers the build; a build
 * that failed throws with its reason. A log that broke off is replaced by reading the
 * build until it ends.
 */
export async function finishBuild(
  creds: Credentials,
  id: string,
  out: NodeJS.WritableStream,
): Promise<Build> {
  const whole = await streamBuildLog(creds, id, true, out).catch((err: unknown) => {
    if (transient(err)) return false;
    throw err;
  });
  if (!whole) process.stderr.write('(the build log broke off; waiting for the build to end)\n');
  const build = await pollUntil(
    () => creds.client.call<Build>('GET', apiPath`/v1/builds/${id}`),
    (b) => b.state === 'done' || b.state === 'failed',
  );
  if (build.state === 'failed') {
    throw new CliError(
      `the build ${id} failed: ${build.error ?? 'no reason given'} (build-failed)`,
    );
  }
  return build;
}

/**
 * Follows a deploy until it ends, calling `onStep` with each new step it reports (and
 * each new status); answers the final deploy. One that ends `error` throws with its reason.
 */
export async function followDeploy(
  client: ApiClient,
  deploy: Deploy,
  onStep: (text: string) => void,
): Promise<Deploy> {
  let last = '';
  const report = (d: Deploy) => {
    // The end is told by what follows (the release live, or the error), not as a step.
    if (d.status === 'done' || d.status === 'error') return;
    const text = d.step ?? d.status;
    if (text !== last) onStep(text);
    last = text;
  };
  report(deploy);
  const final = await pollUntil(
    () => client.call<Deploy>('GET', apiPath`/v1/deploys/${deploy.id}`),
    (d) => d.status === 'done' || d.status === 'error',
    report,
  );
  if (final.status === 'error') {
    throw new CliError(
      `the deploy ${final.id} failed: ${final.error ?? 'no reason given'} (deploy-failed)`,
    );
  }
  return final;
}

/** The app's address, for the end of a deploy. */
export async function appUrl(client: ApiClient, app: string): Promise<string> {
  return (await client.call<{ defaultAddress: string }>('GET', apiPath`/v1/apps/${app}`))
    .defaultAddress;
}

/**
 * Reads `get` every POLL_MS until `done` says so, waiting through an API that is
 * restarting (the work is durable and goes on) for up to OUTAGE_LIMIT_MS.
 */
async function pollUntil<T>(
  get: () => Promise<T>,
  done: (value: T) => boolean,
  each: (value: T) => void = () => {},
): Promise<T> {
  let unreachableSince: number | undefined;
  for (;;) {
    try {
      const value = await get();
      unreachableSince = undefined;
      each(value);
      if (done(value)) return value;
    } catch (err) {
      unreachableSince ??= performance.now();
      if (!transient(err) || performance.now() - unreachableSince > OUTAGE_LIMIT_MS) throw err;
    }
    await sleep(POLL_MS);
  }
}
