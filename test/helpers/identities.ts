/**
 * The database identities (OS users) that test platforms make carry a prefix of their
 * run: `pt<pid of the run's global setup, base 36>-`. The run removes its own at the end;
 * the next run removes those of runs whose process is gone (a crash), and never touches
 * a run still alive, so concurrent runs on one host do not disturb each other. (Loaded
 * by the global setup, so no vitest import here: tests take the prefix with inject.)
 */
import { readFile } from 'node:fs/promises';
import { alive } from '../../src/host/data-dir-lock.js';
import { ServerIdentities } from '../../src/host/server-identities.js';

declare module 'vitest' {
  export interface ProvidedContext {
    identityPrefix: string;
  }
}

const RUN_PREFIX = /^pt([0-9a-z]+)-$/;

/** The prefix of this run's identities (for the global setup to provide). */
export function runIdentityPrefix(pid = process.pid): string {
  return `pt${pid.toString(36)}-`;
}

/** Removes the identities of runs whose process is gone; returns the names removed. */
export async function sweepDeadRuns(): Promise<string[]> {
  const names = (await readFile('/etc/passwd', 'utf8')).split('\n').map((l) => l.split(':')[0]!);
  const prefixes = new Set<string>();
  for (const name of names) {
    const prefix = /^pt[0-9a-z]+-/.exec(name)?.[0];
    const pid = prefix ? parseInt(RUN_PREFIX.exec(prefix)![1]!, 36) : NaN;
    if (prefix && /^pt[0-9a-z]+-[0-9a-f]{16}$/.test(name) && !alive(pid)) prefixes.add(prefix);
  }
  const removed: string[] = [];
  for (const prefix of prefixes) removed.push(...(await new ServerIdentities(prefix).sweep()));
  return removed;
}

/** Removes this run's identities (at its end). */
export async function sweepRun(prefix: string): Promise<string[]> {
  return new ServerIdentities(prefix).sweep();
}
