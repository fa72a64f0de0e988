/**
 * TEST ONLY: the crash points of the "kill -9 at every step" harness
 * (test/helpers/crash-harness.ts, docs/architecture.md "Jobs"). Durable work awaits
 * `crashPoint(kind, point)` at each boundary worth dying at: the worker at a job's claim,
 * after each recorded step ran and after it is recorded, and at the end of its run;
 * services where their work has no steps.
 *
 * The variables are read only when NODE_ENV is `test` (vitest sets it, and `pier serve`
 * started by a test inherits it); in any other process every call returns at once:
 * - `PIER_TEST_CRASH_TRACE=<file>`: each point reached is appended to the file as a line
 *   `<kind>:<point>`, so the harness learns an operation's points from a clean run;
 * - `PIER_TEST_CRASH_AT=<file>`: the file arms points, one `<kind>:<point>` a line (read
 *   at each point, so one process serves many rounds). The first work to reach an armed
 *   line takes it, appends the line to `<file>.reached` and stops there for good; the
 *   harness SIGKILLs the process once every armed line is reached. Several lines, even of
 *   one point, freeze several operations at once: one kill tests them all.
 * Only a first try is traced or stopped: a rerun after the crash passes the same points,
 * and must finish.
 */
import { appendFileSync, readFileSync } from 'node:fs';

const testing = process.env.NODE_ENV === 'test';
const traceFile = testing ? process.env.PIER_TEST_CRASH_TRACE : undefined;
const armFile = testing ? process.env.PIER_TEST_CRASH_AT : undefined;
/** Armed lines (by index) already taken in this process. */
const taken = new Set<number>();

export async function crashPoint(kind: string, point: string, attempt = 1): Promise<void> {
  if (attempt !== 1 || (!traceFile && !armFile)) return;
  const name = `${kind}:${point}`;
  if (traceFile) appendFileSync(traceFile, `${name}\n`);
  if (!armFile) return;
  const lines = readArmed(armFile);
  const i = lines.findIndex((l, n) => l === name && !taken.has(n));
  if (i < 0) return;
  taken.add(i);
  appendFileSync(`${armFile}.reached`, `${name}\n`);
  await new Promise<never>(() => {});
}

function readArmed(file: string): string[] {
  try {
    return readFileSync(file, 'utf8').split('\n');
  } catch {
    return [];
  }
}
