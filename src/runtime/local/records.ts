/**
 * What the local runtime remembers of each machine, one JSON file per machine in
 * `<dataDir>/machines/<id>.json`: its address on the bridge (so a restart of pier keeps
 * every machine's IP, and a new machine never gets one in use), its writable layer, the
 * image it was created from (a restart runs the same digest, whatever its tag says now)
 * and how it is stopped (so destroy and recover need no spec).
 *
 * Beside them, in `<dataDir>/machines/.builds/<id>.json`, the addresses lent to builds
 * (build-networks.ts): a machine never gets one while the build runs, and one a crash left
 * is known at the next start, which takes it back.
 */
import { mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { CgroupLimits } from '../../host/cgroups/cgroup.js';
import type { ImageConfig } from '../images/index.js';
import type { MachineNetwork } from '../runtime.js';
import { allocateIp, isMachineIp } from '../sandbox/index.js';

/** One machine's record. */
export interface MachineRecord {
  id: string;
  ip: string;
  /** The pool volume holding `upper/`, `work/` and `state/`, and its path. */
  volume: string;
  volumePath: string;
  image: { ref: string; digest: string; config: ImageConfig };
  limits: CgroupLimits;
  /** What the last spec said it may reach (absent in records of older versions). */
  network?: MachineNetwork;
  /** How the last spec said to stop it. */
  stop: { signal: NodeJS.Signals; timeoutMs: number };
  createdAt: string;
}

const ID = /^[a-z0-9][a-z0-9-]{0,62}$/;

/** An address lent to a build's network (build-networks.ts), by its netns id. */
export interface BuildLease {
  id: string;
  ip: string;
}

/**
 * Throws unless `id` can name everything a machine has (sandbox, cgroup, volume, netns):
 * lowercase letters, digits and dashes, at most 63.
 */
export function assertMachineId(id: string): void {
  if (typeof id !== 'string' || !ID.test(id)) {
    throw new Error(`invalid machine id: ${JSON.stringify(id)}`);
  }
}

/** The records under one directory, and the addresses they hold. */
export class MachineRecords {
  /** Serialises allocations, so two creates at once never pick the same address. */
  private allocating: Promise<unknown> = Promise.resolve();
  /**
   * Records read or written so far (one pier per data directory, which it locks, so
   * nothing else writes them): the loops that look at every machine every second, and
   * each create's address allocation, read memory, not files.
   */
  private readonly cache = new Map<string, MachineRecord>();
  private cachedAll = false;

  constructor(readonly dir: string) {}

  /** The record of `id`, or undefined. */
  async get(id: string): Promise<MachineRecord | undefined> {
    assertMachineId(id);
    const cached = this.cache.get(id);
    if (cached) return structuredClone(cached);
    if (this.cachedAll) return undefined;
    const read = await this.read(id);
    if (read) this.cache.set(id, read);
    return read && structuredClone(read);
  }

  /** The address of `id`, or undefined: `get` without copying the record (asked per proxied request). */
  async ip(id: string): Promise<string | undefined> {
    assertMachineId(id);
    return this.cache.get(id)?.ip ?? (await this.get(id))?.ip;
  }

  private async read(id: string): Promise<MachineRecord | undefined> {
    const text = await readFile(this.file(id), 'utf8').catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return undefined;
      throw err;
    });
    return text === undefined ? undefined : (JSON.parse(text) as MachineRecord);
  }

  /** Every record (unreadable files skipped: a crash between write and rename leaves none). */
  async all(): Promise<MachineRecord[]> {
    if (this.cachedAll) return [...this.cache.values()].map((r) => structuredClone(r));
    const names = await readdir(this.dir).catch(() => [] as string[]);
    const ids = names.filter((n) => n.endsWith('.json')).map((n) => n.slice(0, -5));
    const out: MachineRecord[] = [];
    for (const id of ids.filter((i) => ID.test(i))) {
      const r = await this.get(id).catch(() => undefined);
      if (r) out.push(r);
    }
    this.cachedAll = true;
    return out;
  }

  /** Writes `record` atomically (a temp file renamed over the old one). */
  async put(record: MachineRecord): Promise<void> {
    assertMachineId(record.id);
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    const temp = path.join(this.dir, `.${record.id}.${process.pid}.tmp`);
    await writeFile(temp, JSON.stringify(record, null, 2), { mode: 0o600 });
    await rename(temp, this.file(record.id));
    this.cache.set(record.id, structuredClone(record));
  }

  async remove(id: string): Promise<void> {
    await rm(this.file(id), { force: true });
    this.cache.delete(id);
  }

  /**
   * Writes the record `make(ip)` builds, with the address `id` already has (when still
   * inside `cidr`) or the lowest one no other record holds. One at a time per runtime.
   */
  async allocate(
    id: string,
    cidr: string,
    make: (ip: string, previous: MachineRecord | undefined) => MachineRecord,
  ): Promise<MachineRecord> {
    const run = this.allocating.then(async () => {
      const previous = await this.get(id);
      let ip = previous?.ip;
      if (ip === undefined || !isMachineIp(cidr, ip)) {
        const taken = new Set((await this.all()).filter((r) => r.id !== id).map((r) => r.ip));
        for (const lease of await this.leases()) taken.add(lease.ip);
        ip = allocateIp(cidr, taken);
      }
      const record = make(ip, previous);
      await this.put(record);
      return record;
    });
    this.allocating = run.catch(() => undefined);
    return run;
  }

  /**
   * Lends build `id` the lowest address no machine or other build holds, written to disk
   * before it is answered. One at a time with machines' allocations.
   */
  async lease(id: string, cidr: string): Promise<BuildLease> {
    const run = this.allocating.then(async () => {
      const taken = new Set((await this.all()).map((r) => r.ip));
      for (const lease of await this.leases()) if (lease.id !== id) taken.add(lease.ip);
      const lease = { id, ip: allocateIp(cidr, taken) };
      await mkdir(this.leasesDir, { recursive: true, mode: 0o700 });
      const temp = path.join(this.leasesDir, `.${id}.${process.pid}.tmp`);
      await writeFile(temp, JSON.stringify(lease), { mode: 0o600 });
      await rename(temp, this.leaseFile(id));
      return lease;
    });
    this.allocating = run.catch(() => undefined);
    return run;
  }

  /** Every address lent to a build (read from disk: few, and read once per rewrite). */
  async leases(): Promise<BuildLease[]> {
    const names = await readdir(this.leasesDir).catch(() => [] as string[]);
    const out: BuildLease[] = [];
    for (const name of names) {
      if (!name.endsWith('.json') || !ID.test(name.slice(0, -5))) continue;
      const text = await readFile(path.join(this.leasesDir, name), 'utf8').catch(() => '');
      try {
        out.push(JSON.parse(text) as BuildLease);
      } catch {
        // unreadable: a crash between write and rename leaves none, so never seen
      }
    }
    return out;
  }

  /** Takes back the address lent to build `id` (idempotent). */
  async endLease(id: string): Promise<void> {
    await rm(this.leaseFile(id), { force: true });
  }

  private get leasesDir(): string {
    return path.join(this.dir, '.builds');
  }

  private leaseFile(id: string): string {
    assertMachineId(id);
    return path.join(this.leasesDir, `${id}.json`);
  }

  private file(id: string): string {
    assertMachineId(id);
    return path.join(this.dir, `${id}.json`);
  }
}
