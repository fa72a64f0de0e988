/**
 * cgroup v1: one hierarchy per controller (freezer, memory, cpu, pids), each with its own
 * copy of pier's root and of every group. The freezer is v1's `freezer.state`: writing
 * FROZEN starts freezing, and the state reads FREEZING until every task is frozen.
 */
import { mkdir } from 'node:fs/promises';
import {
  dirOf,
  V1_CONTROLLERS,
  type CgroupMounts,
  type ProcCgroups,
  type V1Controller,
} from './cgroup-mounts.js';
import {
  exists,
  joinCgroupPath,
  parseLimit,
  quotaUs,
  readText,
  writeText,
  type CgroupBackend,
  type CgroupLimits,
  type FreezeState,
  type LimitKind,
} from './cgroup-fs.js';

export class CgroupV1 implements CgroupBackend {
  readonly version = 1 as const;

  private constructor(
    /** Pier's root directory in each usable hierarchy; the freezer is always there. */
    private readonly roots: Map<V1Controller, string>,
    readonly supports: ReadonlySet<LimitKind>,
    readonly rootPath: string,
  ) {}

  /**
   * Makes pier's root `rootName` under `parent` in each v1 hierarchy (`self`: the cgroup
   * this process is in, per hierarchy). A string is the reason v1 is unusable.
   */
  static async setup(
    mounts: CgroupMounts,
    self: ProcCgroups,
    parent: string,
    rootName: string,
  ): Promise<CgroupV1 | string> {
    const roots = new Map<V1Controller, string>();
    for (const c of V1_CONTROLLERS) {
      const mount = mounts.v1.get(c);
      if (!mount) continue;
      const parentDir = dirOf(mount, parent === 'self' ? (self.v1.get(c) ?? '/') : parent);
      if (!parentDir) continue;
      const dir = `${parentDir}/${rootName}`;
      try {
        await mkdir(dir, { recursive: true });
        roots.set(c, dir);
      } catch (err) {
        if (c === 'freezer') return `cannot create ${dir}: ${(err as Error).message}`;
      }
    }
    const freezer = roots.get('freezer');
    if (!freezer) return 'no cgroup v1 freezer hierarchy is mounted';
    if (!(await exists(`${freezer}/freezer.state`))) return `${freezer} has no freezer.state`;
    const supports = new Set<LimitKind>();
    const probe: [LimitKind, V1Controller, string][] = [
      ['memoryBytes', 'memory', 'memory.limit_in_bytes'],
      ['cpuQuota', 'cpu', 'cpu.cfs_quota_us'],
      ['pids', 'pids', 'pids.max'],
    ];
    for (const [kind, c, file] of probe) {
      const dir = roots.get(c);
      if (dir && (await exists(`${dir}/${file}`))) supports.add(kind);
    }
    return new CgroupV1(
      roots,
      supports,
      parent === 'self' ? rootName : joinCgroupPath(parent, rootName),
    );
  }

  private dir(c: V1Controller, name?: string): string {
    const root = this.roots.get(c);
    if (!root) throw new Error(`the cgroup v1 ${c} controller is not available`);
    return name === undefined ? root : `${root}/${name}`;
  }

  dirs(name?: string): string[] {
    // The freezer first; co-mounted controllers share a directory, listed once.
    return [
      ...new Set(V1_CONTROLLERS.filter((c) => this.roots.has(c)).map((c) => this.dir(c, name))),
    ];
  }

  async writeLimits(name: string, limits: CgroupLimits): Promise<void> {
    if (limits.memoryBytes !== undefined) {
      await writeText(
        `${this.dir('memory', name)}/memory.limit_in_bytes`,
        String(limits.memoryBytes),
      );
    }
    if (limits.cpuQuota !== undefined) {
      const dir = this.dir('cpu', name);
      const period = Number(await readText(`${dir}/cpu.cfs_period_us`));
      await writeText(`${dir}/cpu.cfs_quota_us`, String(quotaUs(limits.cpuQuota, period)));
    }
    if (limits.pids !== undefined) {
      await writeText(`${this.dir('pids', name)}/pids.max`, String(limits.pids));
    }
  }

  async readLimits(name: string): Promise<CgroupLimits> {
    const out: CgroupLimits = {};
    if (this.supports.has('memoryBytes')) {
      out.memoryBytes = parseLimit(
        await readText(`${this.dir('memory', name)}/memory.limit_in_bytes`),
      );
    }
    if (this.supports.has('cpuQuota')) {
      const dir = this.dir('cpu', name);
      const quota = parseLimit(await readText(`${dir}/cpu.cfs_quota_us`));
      const period = Number(await readText(`${dir}/cpu.cfs_period_us`));
      out.cpuQuota = quota === undefined ? undefined : quota / period;
    }
    if (this.supports.has('pids')) {
      out.pids = parseLimit(await readText(`${this.dir('pids', name)}/pids.max`));
    }
    return out;
  }

  requestFreeze(name: string, frozen: boolean): Promise<void> {
    return writeText(`${this.dir('freezer', name)}/freezer.state`, frozen ? 'FROZEN' : 'THAWED');
  }

  async state(name: string): Promise<FreezeState> {
    // Reading is also what moves the kernel's FREEZING to FROZEN once all tasks stopped.
    const state = await readText(`${this.dir('freezer', name)}/freezer.state`);
    return state === 'FROZEN' ? 'frozen' : state === 'THAWED' ? 'thawed' : 'changing';
  }

  async freezeRequested(name: string): Promise<boolean> {
    return (await this.state(name)) !== 'thawed';
  }
}
