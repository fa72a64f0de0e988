/**
 * Disk checkpoints of a machine (spec 4.9). A checkpoint is a read-only pool snapshot of
 * the machine's writable layer (`upper/`, `work/`, `state/`), the volume
 * `mck-<id sans mch->-<key>`: copy-on-write on btrfs (instant, whatever the size), a full
 * copy on a directory pool. A running machine is frozen (cgroup freezer) for the time of
 * the snapshot, so the copy holds exactly what a power cut at that instant would have
 * left, as a database on the machine recovers from.
 *
 * A restore swaps the (stopped) machine's volume for a fresh writable snapshot of the
 * checkpoint, crash-safely: the machine record first names the new volume `restoring`,
 * then one atomic write of the record switches `volume` to it and names the old one
 * `retired`. A crash at any point leaves the machine with its old disk or its new one,
 * never none; the leftover is removed by the next start, restore or destroy. The console
 * log (`state/`) of the current disk is carried over, so log cursors never go back.
 *
 * Memory checkpoints would need CRIU; `criuSupport` says why they cannot be taken here.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { lstat, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import type { CgroupSet } from '../../host/cgroups/cgroup.js';
import { PoolError, type StoragePool } from '../../storage/pool/pool.js';
import type { MachineRecord, MachineRecords } from './records.js';
import { volumeName } from './resources.js';

const execFileP = promisify(execFile);

/** A checkpoint key: what the service numbers checkpoints by (no dash, see `sweep`). */
const KEY = /^[a-z0-9]{1,24}$/;

/** The machine record with the journal of a restore in progress. */
type SwapRecord = MachineRecord & {
  /** The volume a restore is building; removed unless the record switched to it. */
  restoring?: string;
  /** Volumes the machine no longer uses, still to be removed. */
  retired?: string[];
};

function suffix(id: string): string {
  return id.replace(/^mch-/, '');
}

/** The pool volume of checkpoint `key` of machine `id`. */
export function checkpointVolume(id: string, key: string): string {
  if (!KEY.test(key)) throw new Error(`invalid checkpoint key: ${JSON.stringify(key)}`);
  return `mck-${suffix(id)}-${key}`;
}

/** What the checkpoints need of the runtime. */
export interface CheckpointDeps {
  pool: StoragePool;
  records: MachineRecords;
  cgroups: CgroupSet;
  /** Whether the machine's process runs now. */
  isRunning(id: string): Promise<boolean>;
  log: { warn(obj: object, msg: string): void };
}

/** Checkpoints of the machines of one runtime; the runtime holds the machine's lock. */
export class MachineCheckpoints {
  constructor(private readonly d: CheckpointDeps) {}

  async take(id: string, key: string): Promise<{ sizeBytes: number | null }> {
    const name = checkpointVolume(id, key);
    const { pool, cgroups } = this.d;
    if (!(await pool.info(name))) {
      const record = await this.record(id);
      if (!(await pool.info(record.volume)))
        throw new PoolError('not-found', `machine ${id} has no disk on this host`);
      const freeze = (await this.d.isRunning(id)) && !(await cgroups.isFrozen(id));
      if (freeze) await cgroups.freeze(id);
      try {
        await pool.snapshot(record.volume, name, { readOnly: true });
      } finally {
        if (freeze) await cgroups.thaw(id);
      }
    }
    const info = await pool.info(name);
    return { sizeBytes: info?.usedBytes ?? null };
  }

  async restore(id: string, key: string): Promise<void> {
    const source = checkpointVolume(id, key);
    const { pool, records } = this.d;
    if (await this.d.isRunning(id))
      throw new Error(`machine ${id} is running; stop it before a restore`);
    const record = await this.tidy(id);
    if (!(await pool.info(source)))
      throw new PoolError('not-found', `checkpoint ${key} of machine ${id} does not exist`);
    const current = await pool.info(record.volume);
    const next = `${volumeName(id)}-${randomBytes(4).toString('hex')}`;
    await records.put({ ...record, restoring: next } as SwapRecord);
    const made = await pool.snapshot(
      source,
      next,
      current?.quotaBytes ? { quotaBytes: current.quotaBytes } : {},
    );
    // The console log stays the machine's current one (cursors must not go back).
    const newState = path.join(made.path, 'state');
    await rm(newState, { recursive: true, force: true });
    if (current && (await exists(path.join(current.path, 'state')))) {
      await execFileP('cp', ['-a', '-T', path.join(current.path, 'state'), newState]);
    }
    const switched: SwapRecord = {
      ...record,
      volume: next,
      volumePath: made.path,
      retired: [...(record.retired ?? []), record.volume],
    };
    delete switched.restoring;
    await records.put(switched);
    await this.tidy(id);
  }

  async remove(id: string, key: string): Promise<void> {
    await this.d.pool.destroy(checkpointVolume(id, key));
  }

  /**
   * Removes every checkpoint of the machine and what an interrupted restore left (for
   * destroy; works without a record, from the names).
   */
  async removeAll(id: string): Promise<void> {
    const record = (await this.d.records.get(id)) as SwapRecord | undefined;
    if (record) await this.tidy(id);
    const prefix = `mck-${suffix(id)}-`;
    for (const name of await this.d.pool.list()) {
      if (name.startsWith(prefix) && KEY.test(name.slice(prefix.length)))
        await this.d.pool.destroy(name);
    }
  }

  /**
   * Finishes what an interrupted restore left: a half-made new disk, or an old disk not
   * yet removed. Returns the record as it is afterwards.
   */
  async tidy(id: string): Promise<SwapRecord> {
    const record = await this.record(id);
    if (record.restoring === undefined && !record.retired?.length) return record;
    const leftovers = [record.restoring, ...(record.retired ?? [])].filter(
      (v): v is string => v !== undefined && v !== record.volume,
    );
    for (const v of leftovers) await this.d.pool.destroy(v);
    const clean: SwapRecord = { ...record };
    delete clean.restoring;
    delete clean.retired;
    await this.d.records.put(clean);
    return clean;
  }

  private async record(id: string): Promise<SwapRecord> {
    const record = await this.d.records.get(id);
    if (!record) throw new PoolError('not-found', `machine ${id} does not exist on this host`);
    return record as SwapRecord;
  }
}

async function exists(p: string): Promise<boolean> {
  return lstat(p).then(
    () => true,
    () => false,
  );
}

let criu: Promise<{ supported: boolean; reason: string }> | undefined;

/**
 * Whether the memory of a machine can be checkpointed here, and why not: CRIU must be
 * installed and `criu check` pass on this kernel. Asked once per process.
 */
export function criuSupport(): Promise<{ supported: boolean; reason: string }> {
  criu ??= (async () => {
    const env = { ...process.env, PATH: `${process.env.PATH ?? ''}:/usr/sbin:/sbin` };
    try {
      await execFileP('criu', ['check'], { env, timeout: 30_000 });
    } catch (err) {
      const e = err as NodeJS.ErrnoException & { stdout?: string; stderr?: string };
      if (e.code === 'ENOENT') {
        return {
          supported: false,
          reason: 'memory checkpoints need CRIU, which is not installed on this host',
        };
      }
      const detail = `${e.stderr ?? ''}\n${e.stdout ?? ''}`
        .split('\n')
        .map((l) => l.replace(/^\s*Error \([^)]*\):\s*/, '').trim())
        .find((l) => l !== '' && !/^exited, status=/.test(l));
      return {
        supported: false,
        reason:
          `CRIU cannot checkpoint processes on this host's kernel (${os.release()})` +
          (detail ? `: criu check says "${detail.slice(0, 200)}"` : ''),
      };
    }
    return {
      supported: false,
      reason:
        'CRIU works on this host, but pier cannot yet checkpoint the memory of a sandboxed ' +
        'machine (its namespaces and console pipes would have to be dumped with it)',
    };
  })();
  return criu;
}
