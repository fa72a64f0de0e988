/**
 * Timed operations on machines through pier's API, and where their time went. Every
 * operation that brings a machine up (create, start) is timed the same way — the POST,
 * then GETs through the proxy until the first 200 — so that their figures compare with
 * each other and with the baselines, which wait the same way (`firstOk`). The
 * transitions that only prepare a sample (stop, suspend) are checked and timed alike,
 * for context; a burst of creates is timed create by create. Where a POST's time went is
 * read from the machine it answered (its `createdAt`, `readyAt` and `bootMs`).
 */
import { fmtMs, Stopwatch, type Sample } from './db-samples.js';
import { firstOk, proxiedGet, type MachinePier } from './machine-pier.js';

/** Throws unless the machine `action` answered is in `state`. */
export function expectState(action: string, m: { observedState: string }, state: string): void {
  if (m.observedState !== state) throw new Error(`${action} left the machine ${m.observedState}`);
}

/**
 * `POST /v1/machines/:id/<action>`, which must leave the machine in `state`; answers its
 * time in ms (reported apart: no comparison includes it).
 */
export async function timedTransition(
  b: MachinePier,
  id: string,
  action: string,
  state: string,
): Promise<number> {
  const watch = new Stopwatch();
  expectState(action, await b.api('POST', `/v1/machines/${id}/${action}`), state);
  watch.step('done');
  return watch.done().ms;
}

/** Where a POST's time went, from the machine it answered: ms by part, and their line. */
interface Timeline {
  split(sentAt: number, answeredAt: number, m: any): Record<string, number>;
  describe(t: Record<string, number>): string;
}

/** One operation timed up to the machine's first 200 through the proxy. */
export interface ProxiedSample {
  /** The POST (`step`) + `first proxied 200`. */
  sample: Sample;
  /** The POST alone, split by the answer's own timestamps (its `Timeline`). */
  post: Sample;
  /** `POST…: ` and where its time went, for the sample's log line. */
  postLine: string;
  /** How many GETs it took to get the 200. */
  tries: number;
  /** The POST's answer: the machine. */
  machine: any;
}

/**
 * Times `post` as the part `step`, then GETs through the proxy on `app` until the first
 * 200. `check` looks at the answer after the POST's part has ended (not timed), so that a
 * machine left in the wrong state fails at once rather than after 30 s of GETs.
 */
async function timeToFirstProxied200(
  b: MachinePier,
  app: string,
  op: {
    step: string;
    /** How the POST is named on the log line. */
    label: string;
    post: () => Promise<any>;
    timeline: Timeline;
    check?: (m: any) => void;
  },
): Promise<ProxiedSample> {
  const sentAt = Date.now();
  const watch = new Stopwatch();
  const m = await op.post();
  watch.step(op.step);
  op.check?.(m);
  const answeredAt = Date.now();
  const tries = await firstOk(() => proxiedGet(b.url, app));
  watch.step('first proxied 200');
  const sample = watch.done();
  const parts = op.timeline.split(sentAt, answeredAt, m);
  const post = { ms: sample.parts[op.step]!, parts };
  return {
    sample,
    post,
    postLine: `${op.label}: ${op.timeline.describe(parts)}`,
    tries,
    machine: m,
  };
}

/** Creates a machine in `app` (which must exist) → first proxied 200. */
export function timedCreate(b: MachinePier, app: string): Promise<ProxiedSample> {
  return timeToFirstProxied200(b, app, {
    step: 'POST 201',
    label: 'POST',
    post: () => b.createMachine(app),
    timeline: { split: createTimeline, describe: describeCreateTimeline },
  });
}

/** Starts the stopped machine `id` of `app` → first proxied 200. */
export function timedStart(b: MachinePier, app: string, id: string): Promise<ProxiedSample> {
  return timeToFirstProxied200(b, app, {
    step: 'POST start',
    label: 'POST start',
    post: () => b.api('POST', `/v1/machines/${id}/start`),
    check: (m) => expectState('start', m, 'running'),
    timeline: { split: startTimeline, describe: describeStartTimeline },
  });
}

/** One of many creates sent at once: the machine, or the first line of its error. */
export interface Created {
  id?: string;
  ip?: string;
  ms: number;
  /** Where its time went (createTimeline). */
  where?: Record<string, number>;
  error?: string;
}

/**
 * `count` creates in `app` sent at once; each one's own time and answer. A failed create
 * is an answer too (counted and reported), not a failure of the whole.
 */
export async function createMany(b: MachinePier, app: string, count: number): Promise<Created[]> {
  return Promise.all(
    Array.from({ length: count }, async (): Promise<Created> => {
      const sentAt = Date.now();
      const watch = new Stopwatch();
      try {
        const m = await b.createMachine(app);
        watch.step('201');
        const where = createTimeline(sentAt, Date.now(), m);
        return { id: m.id, ip: m.privateIp, ms: watch.done().ms, where };
      } catch (err) {
        watch.step('error');
        return { ms: watch.done().ms, error: (err as Error).message.split('\n')[0]! };
      }
    }),
  );
}

/** `(boot X: sandbox spawn → port open)`: the part of the POST the machine itself took. */
const describeBoot = (t: Record<string, number>) =>
  `(boot ${fmtMs(t.boot!)}: sandbox spawn → port open)`;

/**
 * Where a create's time went, from the answer's server-side timestamps: the request until
 * the row (`createdAt`), the row until `readyAt` (job pick-up, writable layer, record,
 * overlay, netns, cgroup, sandbox, port check; `bootMs` of it runs from the sandbox's
 * spawn to the open port), and `readyAt` until the 201 reached the client.
 */
function createTimeline(
  sentAt: number,
  answeredAt: number,
  m: { createdAt: string; readyAt?: string; bootMs?: number },
): Record<string, number> {
  const created = Date.parse(m.createdAt);
  const ready = m.readyAt ? Date.parse(m.readyAt) : answeredAt;
  return {
    toRow: created - sentAt,
    rowToReady: ready - created,
    boot: m.bootMs ?? 0,
    readyTo201: answeredAt - ready,
  };
}

function describeCreateTimeline(t: Record<string, number>): string {
  return (
    `request→row ${fmtMs(t.toRow!)}, row→ready ${fmtMs(t.rowToReady!)} ` +
    `${describeBoot(t)}, ready→201 ${fmtMs(t.readyTo201!)}`
  );
}

/**
 * Where a start's time went: the request until `readyAt` (the row is the machine's own,
 * so there is no row to wait for; `bootMs` as in a create), and `readyAt` until the answer.
 */
function startTimeline(
  sentAt: number,
  answeredAt: number,
  m: { readyAt?: string; bootMs?: number },
): Record<string, number> {
  const ready = m.readyAt ? Date.parse(m.readyAt) : answeredAt;
  return { toReady: ready - sentAt, boot: m.bootMs ?? 0, readyToAnswer: answeredAt - ready };
}

function describeStartTimeline(t: Record<string, number>): string {
  return (
    `request→ready ${fmtMs(t.toReady!)} ${describeBoot(t)}, ` +
    `ready→answer ${fmtMs(t.readyToAnswer!)}`
  );
}
