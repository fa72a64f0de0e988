/**
 * Pier's cgroups: one per database server process tree, under a root of pier's own.
 * They cap memory, CPU and process count, and, for sleeping databases, freeze: a frozen
 * server keeps its memory and sockets but gets no CPU, and a thaw brings it back in
 * milliseconds, which is what lets a TCP front wake it on a client's connect.
 *
 * Works with cgroup v1 (separate freezer/memory/cpu/pids hierarchies) and v2 (unified),
 * detected at runtime from /proc. Group names are validated, so no name reaches outside
 * pier's root. Nothing here kills a process.
 */
import { writeFileSync } from 'node:fs';
import { mkdir, readFile, rmdir } from 'node:fs/promises';
import { descendants } from './proc-tree.js';
import { parseMountinfo, parseProcCgroup } from './cgroup-mounts.js';
import {
  exists,
  readText,
  writeText,
  type CgroupBackend,
  type CgroupLimits,
  type FreezeState,
  type LimitKind,
} from './cgroup-fs.js';
import { CgroupV1 } from './cgroup-v1.js';
import { CgroupV2 } from './cgroup-v2.js';

export type { CgroupLimits, LimitKind } from './cgroup-fs.js';

const NAME = /^[a-z0-9][a-z0-9-]{0,100}$/;

/** Throws unless `name` is a valid group (or root) name: lowercase, digits, dashes. */
export function assertCgroupName(name: string): void {
  if (!NAME.test(name)) throw new Error(`invalid cgroup name: ${JSON.stringify(name)}`);
}

export interface CgroupSetOptions {
  /** Name of pier's root group, holding all of its groups (default `pier`). */
  root?: string;
  /**
   * The cgroup (as /proc shows it, e.g. `/` or `/system.slice`) the root is made in.
   * Default `self`: the cgroup this process is in (per hierarchy on v1), so databases
   * stay inside whatever limits and accounting the operator gave pier. On v2, limits then
   * need that cgroup to be able to delegate controllers (no processes of its own: run
   * pier under systemd with `Delegate=yes` in a leaf, or pass `/`).
   */
  parent?: string;
  /** Force a version; by default v1 when a v1 freezer is mounted, else v2. */
  version?: 1 | 2;
  /** How long freeze and thaw wait for the kernel to report the state (default 5 s). */
  timeoutMs?: number;
}

/** The result of `CgroupSet.probe`: a usable set, or why there is none. */
export type CgroupProbe =
  { set: CgroupSet; reason?: undefined } | { set?: undefined; reason: string };

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Pier's cgroups under one root, on whichever cgroup version the host runs. */
export class CgroupSet {
  private constructor(
    private readonly backend: CgroupBackend,
    /** Name of pier's root group. */
    readonly root: string,
    private readonly timeoutMs: number,
  ) {}

  /**
   * Finds the cgroup hierarchies, creates the root group (idempotent) and checks the
   * freezer works there. Never throws: an unusable host gives a reason (not root, no
   * freezer, not Linux…).
   */
  static async probe(opts: CgroupSetOptions = {}): Promise<CgroupProbe> {
    const root = opts.root ?? 'pier';
    const parent = opts.parent ?? 'self';
    try {
      assertCgroupName(root);
      if (parent !== 'self' && (!parent.startsWith('/') || parent.split('/').includes('..'))) {
        throw new Error(`invalid cgroup parent: ${JSON.stringify(parent)}`);
      }
    } catch (err) {
      return { reason: (err as Error).message };
    }
    if (process.platform !== 'linux') return { reason: 'cgroups need Linux' };
    if (process.geteuid?.() !== 0) return { reason: 'not running as root' };
    let mounts, self;
    try {
      mounts = parseMountinfo(await readFile('/proc/self/mountinfo', 'utf8'));
      self = parseProcCgroup(await readFile('/proc/self/cgroup', 'utf8'));
    } catch (err) {
      return { reason: `cannot read /proc: ${(err as Error).message}` };
    }
    const versions = opts.version ? [opts.version] : mounts.v1.has('freezer') ? [1, 2] : [2];
    const reasons: string[] = [];
    for (const version of versions) {
      const made =
        version === 1
          ? await CgroupV1.setup(mounts, self, parent, root)
          : await CgroupV2.setup(mounts, self, parent, root);
      if (typeof made !== 'string')
        return { set: new CgroupSet(made, root, opts.timeoutMs ?? 5_000) };
      reasons.push(`v${version}: ${made}`);
    }
    return { reason: reasons.join('; ') };
  }

  /** `probe` for callers that only need the set; the reason goes to `onUnavailable`. */
  static async detect(
    opts: CgroupSetOptions = {},
    onUnavailable?: (reason: string) => void,
  ): Promise<CgroupSet | undefined> {
    const { set, reason } = await CgroupSet.probe(opts);
    if (!set) onUnavailable?.(reason);
    return set;
  }

  /** The cgroup version in use. */
  get version(): 1 | 2 {
    return this.backend.version;
  }

  /** The limits this host can enforce; `create` refuses others. */
  get supports(): ReadonlySet<LimitKind> {
    return this.backend.supports;
  }

  /**
   * Directories of group `name` (or of the root when omitted), one per hierarchy (four
   * on v1, one on v2), the freezer's first. For logs and tests; the files are the kernel's.
   */
  dirs(name?: string): string[] {
    if (name !== undefined) assertCgroupName(name);
    return this.backend.dirs(name);
  }

  /**
   * Group `name` as an OCI runtime's `cgroupsPath` takes it: `pier/<name>`, relative to
   * the cgroups of the runtime's process, which pier starts from its own (or absolute
   * when the set was made under an explicit parent).
   */
  path(name: string): string {
    assertCgroupName(name);
    return `${this.backend.rootPath}/${name}`;
  }

  /**
   * Creates group `name` (idempotent) and writes the limits given; absent ones are left
   * as they are, so calling again with new limits resizes the group. Throws for a limit
   * this host cannot enforce (see `supports`) or an invalid value.
   */
  async create(name: string, limits: CgroupLimits = {}): Promise<void> {
    assertCgroupName(name);
    checkLimits(limits, this.supports);
    for (const dir of this.backend.dirs(name)) await mkdir(dir, { recursive: true });
    await this.backend.writeLimits(name, limits);
  }

  /** The limits in force, read back from the kernel (undefined: unlimited or unsupported). */
  async limits(name: string): Promise<CgroupLimits> {
    await this.mustExist(name);
    return this.backend.readLimits(name);
  }

  /**
   * Moves process `pid` (only it) into group `name` at once, synchronously: called right
   * after spawning a process that is about to fork, so that what it forks is born inside.
   * `adopt` afterwards catches anything that was quicker.
   */
  enterNow(name: string, pid: number): void {
    assertCgroupName(name);
    for (const dir of this.backend.dirs(name)) {
      try {
        writeFileSync(`${dir}/cgroup.procs`, String(pid));
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === 'ENOENT') throw new Error(`cgroup ${name} does not exist (${dir})`);
        if (code === 'ESRCH') throw new Error(`cannot move pid ${pid}: no such process`);
        throw err;
      }
    }
  }

  /**
   * Moves process `pid` and all its current descendants into group `name`: the root pid
   * first (so what it forks from then on is born inside), then the descendants found by
   * scanning /proc, again until a scan finds none outside (a child may fork while the
   * scan runs). Refuses a tree that holds this process. Resolves with the pids moved.
   */
  async adopt(name: string, pid: number): Promise<number[]> {
    await this.mustExist(name);
    if (!Number.isInteger(pid) || pid < 2) throw new Error(`cannot adopt pid ${pid}`);
    const tree = await descendants(pid);
    if (pid === process.pid || tree.includes(process.pid)) {
      throw new Error(`cannot adopt pid ${pid}: its tree holds this process`);
    }
    if (!(await this.move(name, pid))) throw new Error(`cannot adopt pid ${pid}: no such process`);
    const moved = [pid];
    for (let pass = 0; pass < 20; pass++) {
      const inside = new Set(await this.pids(name));
      const outside = (await descendants(pid)).filter((p) => !inside.has(p));
      if (outside.length === 0) return moved;
      for (const p of outside) if (await this.move(name, p)) moved.push(p);
    }
    throw new Error(`cannot adopt pid ${pid}: its process tree keeps changing`);
  }

  /** Writes `pid` into every hierarchy of the group; false when the process is gone. */
  private async move(name: string, pid: number): Promise<boolean> {
    for (const dir of this.backend.dirs(name)) {
      try {
        await writeText(`${dir}/cgroup.procs`, String(pid));
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ESRCH') return false;
        throw err;
      }
    }
    return true;
  }

  /**
   * Freezes group `name`; resolves once the kernel reports every task frozen. When that
   * does not happen in time (a task stuck in the kernel), thaws the group again and throws,
   * so a failed freeze never leaves a half-frozen server.
   */
  async freeze(name: string): Promise<void> {
    await this.mustExist(name);
    await this.backend.requestFreeze(name, true);
    if (await this.reach(name, 'frozen')) return;
    await this.backend.requestFreeze(name, false).catch(() => {});
    throw new Error(`cgroup ${name} did not freeze within ${this.timeoutMs} ms; thawed again`);
  }

  /** Thaws group `name`; resolves once the kernel reports it thawed. On the wake path. */
  async thaw(name: string): Promise<void> {
    await this.mustExist(name);
    await this.backend.requestFreeze(name, false);
    if (!(await this.reach(name, 'thawed'))) {
      throw new Error(`cgroup ${name} did not thaw within ${this.timeoutMs} ms`);
    }
  }

  /** Polls the kernel's state: at once, then at 1, 2, 4… up to 16 ms apart. */
  private async reach(name: string, want: FreezeState): Promise<boolean> {
    const deadline = Date.now() + this.timeoutMs;
    for (let pause = 1; ; pause = Math.min(pause * 2, 16)) {
      if ((await this.backend.state(name)) === want) return true;
      if (Date.now() >= deadline) return false;
      await sleep(pause);
    }
  }

  /**
   * True when a freeze was asked for and not undone (frozen, or still freezing): the
   * group needs a thaw before its server can answer. False for a missing group.
   */
  async isFrozen(name: string): Promise<boolean> {
    assertCgroupName(name);
    const [freezerDir] = this.backend.dirs(name);
    if (!freezerDir || !(await exists(freezerDir))) return false;
    return this.backend.freezeRequested(name).catch((err: NodeJS.ErrnoException) => {
      // Removed meanwhile (see `pids`): nothing is frozen there any more.
      if (err.code === 'ENOENT' || err.code === 'ENODEV') return false;
      throw err;
    });
  }

  /** Pids of the processes in group `name` (any hierarchy), ascending; [] for a missing group. */
  async pids(name: string): Promise<number[]> {
    assertCgroupName(name);
    const all = new Set<number>();
    for (const dir of this.backend.dirs(name)) {
      // ENODEV: the group is being removed (an OCI runtime removes it when its sandbox ends).
      const text = await readText(`${dir}/cgroup.procs`).catch((err: NodeJS.ErrnoException) => {
        if (err.code === 'ENOENT' || err.code === 'ENODEV') return '';
        throw err;
      });
      for (const line of text.split('\n')) if (line) all.add(Number(line));
    }
    return [...all].sort((a, b) => a - b);
  }

  /**
   * Removes group `name` (idempotent). Thaws it first if frozen, so its processes are
   * never left stuck; kills and moves nothing: while processes remain, the group stays
   * and this resolves false (call again once they exited). True once no directory is left.
   */
  async remove(name: string): Promise<boolean> {
    assertCgroupName(name);
    if (await this.isFrozen(name)) await this.thaw(name);
    if ((await this.pids(name)).length > 0) return false;
    for (const dir of this.backend.dirs(name)) {
      if (!(await removeDir(dir))) return false;
    }
    return true;
  }

  private async mustExist(name: string): Promise<void> {
    assertCgroupName(name);
    for (const dir of this.backend.dirs(name)) {
      if (!(await exists(dir))) throw new Error(`cgroup ${name} does not exist (${dir})`);
    }
  }
}

/**
 * rmdir of an empty cgroup; tasks that have exited but are not yet reaped keep it busy
 * for a moment, so EBUSY is retried for up to a second. False if it stays busy.
 */
async function removeDir(dir: string): Promise<boolean> {
  for (let attempt = 0; ; attempt++) {
    try {
      await rmdir(dir);
      return true;
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') return true;
      if (code !== 'EBUSY' || attempt >= 50) {
        if (code === 'EBUSY') return false;
        throw err;
      }
      await sleep(20);
    }
  }
}

function checkLimits(limits: CgroupLimits, supports: ReadonlySet<LimitKind>): void {
  for (const [kind, value] of Object.entries(limits) as [LimitKind, number | undefined][]) {
    if (value === undefined) continue;
    const integer = kind !== 'cpuQuota';
    if (!Number.isFinite(value) || value <= 0 || (integer && !Number.isSafeInteger(value))) {
      throw new Error(`invalid cgroup limit ${kind}: ${value}`);
    }
    if (!supports.has(kind)) throw new Error(`this host's cgroups cannot limit ${kind}`);
  }
}
