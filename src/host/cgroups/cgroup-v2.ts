/**
 * cgroup v2: one unified hierarchy. The freezer is the core `cgroup.freeze` file (Linux
 * 5.2+, in every non-root cgroup, no controller needed), its reached state the `frozen`
 * line of `cgroup.events`. Limits need the memory, cpu and pids controllers enabled in
 * `cgroup.subtree_control` of every ancestor; a parent that holds processes itself cannot
 * enable them (the kernel's "no internal processes" rule), and then limits are unsupported.
 */
import { mkdir } from 'node:fs/promises';
import { dirOf, type CgroupMounts, type ProcCgroups } from './cgroup-mounts.js';
import {
  CPU_PERIOD_US,
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

const CONTROLLERS: [LimitKind, string][] = [
  ['memoryBytes', 'memory'],
  ['cpuQuota', 'cpu'],
  ['pids', 'pids'],
];

/** Enables `controller` for the children of `dir`; false when the kernel refuses. */
async function enable(dir: string, controller: string): Promise<boolean> {
  const words = async (file: string) =>
    (await readText(`${dir}/${file}`).catch(() => '')).split(/\s+/);
  if ((await words('cgroup.subtree_control')).includes(controller)) return true;
  if (!(await words('cgroup.controllers')).includes(controller)) return false;
  return writeText(`${dir}/cgroup.subtree_control`, `+${controller}`).then(
    () => true,
    () => false,
  );
}

export class CgroupV2 implements CgroupBackend {
  readonly version = 2 as const;

  private constructor(
    private readonly root: string,
    readonly supports: ReadonlySet<LimitKind>,
    readonly rootPath: string,
  ) {}

  /**
   * Makes pier's root `rootName` under `parent` (`self`: this process's cgroup) and
   * delegates what controllers it can to it. A string is the reason v2 is unusable.
   */
  static async setup(
    mounts: CgroupMounts,
    self: ProcCgroups,
    parent: string,
    rootName: string,
  ): Promise<CgroupV2 | string> {
    if (!mounts.v2) return 'no cgroup v2 hierarchy is mounted';
    const parentDir = dirOf(mounts.v2, parent === 'self' ? (self.v2 ?? '/') : parent);
    if (!parentDir) return `cgroup ${parent} is outside the mounted cgroup v2 tree`;
    const root = `${parentDir}/${rootName}`;
    try {
      await mkdir(root, { recursive: true });
    } catch (err) {
      return `cannot create ${root}: ${(err as Error).message}`;
    }
    if (!(await exists(`${root}/cgroup.freeze`))) {
      return 'cgroup v2 has no freezer here (cgroup.freeze needs Linux 5.2+)';
    }
    const supports = new Set<LimitKind>();
    for (const [kind, controller] of CONTROLLERS) {
      if ((await enable(parentDir, controller)) && (await enable(root, controller))) {
        supports.add(kind);
      }
    }
    return new CgroupV2(
      root,
      supports,
      parent === 'self' ? rootName : joinCgroupPath(parent, rootName),
    );
  }

  dirs(name?: string): string[] {
    return [name === undefined ? this.root : `${this.root}/${name}`];
  }

  private file(name: string, file: string): string {
    return `${this.root}/${name}/${file}`;
  }

  async writeLimits(name: string, limits: CgroupLimits): Promise<void> {
    if (limits.memoryBytes !== undefined) {
      await writeText(this.file(name, 'memory.max'), String(limits.memoryBytes));
    }
    if (limits.cpuQuota !== undefined) {
      const quota = quotaUs(limits.cpuQuota, CPU_PERIOD_US);
      await writeText(this.file(name, 'cpu.max'), `${quota} ${CPU_PERIOD_US}`);
    }
    if (limits.pids !== undefined) {
      await writeText(this.file(name, 'pids.max'), String(limits.pids));
    }
  }

  async readLimits(name: string): Promise<CgroupLimits> {
    const out: CgroupLimits = {};
    if (this.supports.has('memoryBytes')) {
      out.memoryBytes = parseLimit(await readText(this.file(name, 'memory.max')));
    }
    if (this.supports.has('cpuQuota')) {
      const [quota = 'max', period = String(CPU_PERIOD_US)] = (
        await readText(this.file(name, 'cpu.max'))
      ).split(' ');
      const q = parseLimit(quota);
      out.cpuQuota = q === undefined ? undefined : q / Number(period);
    }
    if (this.supports.has('pids')) {
      out.pids = parseLimit(await readText(this.file(name, 'pids.max')));
    }
    return out;
  }

  requestFreeze(name: string, frozen: boolean): Promise<void> {
    return writeText(this.file(name, 'cgroup.freeze'), frozen ? '1' : '0');
  }

  async state(name: string): Promise<FreezeState> {
    const events = await readText(this.file(name, 'cgroup.events'));
    if (/^frozen 1$/m.test(events)) return 'frozen';
    return (await this.freezeRequested(name)) ? 'changing' : 'thawed';
  }

  async freezeRequested(name: string): Promise<boolean> {
    return (await readText(this.file(name, 'cgroup.freeze'))) === '1';
  }
}
