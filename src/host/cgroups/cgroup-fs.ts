/**
 * What the two cgroup versions have in common for pier: the backend contract and the
 * file access. Cgroup files are written with one write(2) and never created (O_WRONLY,
 * no O_CREAT), so a missing controller file fails with ENOENT instead of a strange EPERM.
 */
import { constants } from 'node:fs';
import { access, readFile, writeFile } from 'node:fs/promises';

/** Resource limits of a group; an absent field is left as it is. */
export interface CgroupLimits {
  /** Hard memory limit in bytes (v1 `memory.limit_in_bytes`, v2 `memory.max`). */
  memoryBytes?: number;
  /** CPU time as a number of cores, e.g. 0.5 (CFS quota over a 100 ms period). */
  cpuQuota?: number;
  /** Maximum number of processes and threads. */
  pids?: number;
}

export type LimitKind = keyof CgroupLimits;

/** What the kernel reports of a group's freezing now. */
export type FreezeState = 'frozen' | 'thawed' | 'changing';

/** The version-specific half of a CgroupSet. */
export interface CgroupBackend {
  readonly version: 1 | 2;
  /** The limits this host can enforce (controllers mounted and delegated). */
  readonly supports: ReadonlySet<LimitKind>;
  /**
   * Directories of group `name` (or of the root when omitted), one per hierarchy, no
   * duplicates; the first one holds the freezer.
   */
  dirs(name?: string): string[];
  /**
   * Pier's root as a cgroup path: absolute (`/x/pier`) under an explicit parent, else
   * relative (`pier`) to the cgroup of pier's processes, hierarchy by hierarchy (on v1
   * they may differ, and a relative path is the only one that names the group in all).
   */
  readonly rootPath: string;
  writeLimits(name: string, limits: CgroupLimits): Promise<void>;
  readLimits(name: string): Promise<CgroupLimits>;
  /** Asks the kernel to freeze (true) or thaw (false) the group; does not wait. */
  requestFreeze(name: string, frozen: boolean): Promise<void>;
  state(name: string): Promise<FreezeState>;
  /** True once a freeze was asked for and not undone (a thaw is needed). */
  freezeRequested(name: string): Promise<boolean>;
}

/** `parent` (a cgroup path such as `/` or `/system.slice`) joined with `name`. */
export function joinCgroupPath(parent: string, name: string): string {
  return `${parent.replace(/\/+$/, '')}/${name}`;
}

export async function readText(file: string): Promise<string> {
  return (await readFile(file, 'utf8')).trim();
}

/** Writes `value` to an existing cgroup file; the error names the file and keeps its code. */
export async function writeText(file: string, value: string): Promise<void> {
  try {
    await writeFile(file, value, { flag: constants.O_WRONLY });
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    throw Object.assign(new Error(`cannot write '${value}' to ${file}: ${e.message}`), {
      code: e.code,
    });
  }
}

export async function exists(file: string): Promise<boolean> {
  return access(file).then(
    () => true,
    () => false,
  );
}

/** A limit value read back: `max` (or v1's huge "unlimited") is undefined. */
export function parseLimit(text: string): number | undefined {
  if (text === 'max' || text === '-1') return undefined;
  const n = Number(text);
  // v1 spells "no memory limit" as PAGE_COUNTER_MAX pages in bytes (~2^63).
  return Number.isSafeInteger(n) ? n : undefined;
}

/** Default CFS period (100 ms) used for v2, and the kernel's smallest quota (1 ms). */
export const CPU_PERIOD_US = 100_000;
export const CPU_MIN_QUOTA_US = 1_000;

export function quotaUs(cores: number, periodUs: number): number {
  return Math.max(CPU_MIN_QUOTA_US, Math.round(cores * periodUs));
}
