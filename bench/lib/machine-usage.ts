/**
 * What pier and the machines it runs use, read from /proc (lib/machine-proc.ts): pier's
 * own memory, its CPU split by who spent it (pier's loop, the tools it ran, its
 * PostgreSQL backends) against the whole host's, and the per-machine processes pier
 * starts (keepers, runc and the init, the machines' own httpd). `machines-many`
 * reads them around its burst of creates; they live here so that the benchmark states
 * only when it reads what.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { MachinePier } from './machine-pier.js';
import {
  childCpuSeconds,
  cpuByCmdline,
  cpuDelta,
  cpuSeconds,
  hostBusySeconds,
  memoryOf,
  memoryOfAll,
  processCount,
  type Memory,
} from './machine-proc.js';

/** The memory of the `pier serve` process; its log's tail in the error if it is gone. */
export async function pierMemory(b: MachinePier): Promise<Memory> {
  const m = await memoryOf(b.pid);
  if (!m) throw new Error(`pier (pid ${b.pid}) is gone:\n${await b.logTail()}`);
  return m;
}

/** CPU seconds, split by who spent them. */
export interface CpuSplit {
  /** The `pier serve` process itself. */
  pier: number;
  /** The children pier waited for: the tools it ran (ip, btrfs, mount, nsenter...). */
  tools: number;
  /** The whole host, busy (all CPUs). */
  host: number;
}

/** CPU counters at one moment, for `cpuSince`. */
export interface CpuMark extends CpuSplit {
  b: MachinePier;
  /** Per pier's PostgreSQL backend (a backend that ends in between is lost). */
  pg: Map<number, number>;
}

/** pier's backends show its database's name in their command line. */
const pgNeedle = (b: MachinePier) => b.databaseName ?? 'no-database';

export async function markCpu(b: MachinePier): Promise<CpuMark> {
  return {
    b,
    pier: await cpuSeconds(b.pid),
    tools: await childCpuSeconds(b.pid),
    host: await hostBusySeconds(),
    pg: await cpuByCmdline('postgres', pgNeedle(b)),
  };
}

/** The CPU spent since `mark`; `pg`: by pier's PostgreSQL backends. */
export async function cpuSince(mark: CpuMark): Promise<CpuSplit & { pg: number }> {
  const { b } = mark;
  return {
    pier: (await cpuSeconds(b.pid)) - mark.pier,
    tools: (await childCpuSeconds(b.pid)) - mark.tools,
    host: (await hostBusySeconds()) - mark.host,
    pg: cpuDelta(mark.pg, await cpuByCmdline('postgres', pgNeedle(b))),
  };
}

/** The share of a core pier uses over the next `seconds` (left alone meanwhile). */
export async function pierCpuOver(b: MachinePier, seconds: number): Promise<number> {
  const from = await cpuSeconds(b.pid);
  await sleep(seconds * 1000);
  return ((await cpuSeconds(b.pid)) - from) / seconds;
}

/**
 * The processes pier runs for the machines `ids`, found by their sandbox records: the
 * Node keepers, runc (which waits and relays output) and the init, and the machines' own main process (httpd);
 * the keepers' CPU over their life so far; and the host's process count.
 */
export async function machinesUsage(b: MachinePier, ids: string[]) {
  const records = (await b.sandboxRecords()).filter((r) => ids.includes(r.id));
  const keepers = await memoryOfAll(records.map((r) => r.keeper.pid));
  const runtimes = await memoryOfAll(records.flatMap((r) => [r.runtime.pid, r.init.pid]));
  const mains = await memoryOfAll(records.flatMap((r) => (r.main ? [r.main.pid] : [])));
  const processes = await processCount();
  let keepersCpu = 0;
  for (const r of records) keepersCpu += await cpuSeconds(r.keeper.pid);
  return { keepers, runtimes, mains, processes, keepersCpu };
}
