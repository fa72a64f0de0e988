/**
 * What the sandbox tests share: whether this host can run sandboxes at all, a tiny root
 * filesystem made of the host's static busybox, and machines on overlays of it.
 */
import { execFileSync } from 'node:child_process';
import {
  access,
  chmod,
  chown,
  copyFile,
  mkdir,
  mkdtemp,
  rm,
  rmdir,
  symlink,
  writeFile,
} from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { CgroupSet, type CgroupLimits } from '../../host/cgroups/cgroup.js';
import type { LogEntry } from './logs.js';
import type { ExitStatus } from './protocol.js';
import { mountRootfs, unmountRootfs } from './rootfs.js';
import { Sandboxes } from './run.js';
import type { MachineRuntimeName } from './runtimes.js';
import type { SandboxSpec } from './spec.js';
import { hostId, shiftOwnership } from './userns.js';

const BUSYBOX = '/bin/busybox';

/** Why sandboxes cannot run here, or undefined when they can. */
export async function sandboxUnavailable(): Promise<string | undefined> {
  if (process.platform !== 'linux') return 'sandboxes need Linux';
  if (process.getuid?.() !== 0) return 'not running as root';
  for (const tool of ['runc', 'tini-static', 'unshare', 'mkfifo', 'ip', 'mount']) {
    try {
      execFileSync('sh', ['-c', 'command -v "$1"', 'sh', tool], { stdio: 'ignore' });
    } catch {
      return `${tool} is not installed`;
    }
  }
  if (
    !(await access(BUSYBOX).then(
      () => true,
      () => false,
    ))
  )
    return `${BUSYBOX} is missing`;
  return undefined;
}

/**
 * An image root in `dir`: busybox with a link per applet in /bin, /etc/passwd and
 * /etc/group with root and `app` (1000), the usual empty directories, and a file
 * `/etc/image-marker` to tell the image's files from the host's.
 */
export async function makeImageRoot(dir: string): Promise<string> {
  await mkdir(dir, { recursive: true });
  await chmod(dir, 0o755);
  for (const d of ['bin', 'etc', 'proc', 'dev', 'tmp', 'root', 'home/app', 'srv', 'var/www']) {
    await mkdir(path.join(dir, d), { recursive: true, mode: 0o755 });
  }
  await chmod(path.join(dir, 'tmp'), 0o1777);
  await copyFile(BUSYBOX, path.join(dir, 'bin/busybox'));
  await chmod(path.join(dir, 'bin/busybox'), 0o755);
  const applets = execFileSync(BUSYBOX, ['--list'], { encoding: 'utf8' }).split('\n');
  for (const applet of applets.filter((a) => /^[a-z0-9_.[-]+$/.test(a) && a !== 'busybox')) {
    await symlink('busybox', path.join(dir, 'bin', applet)).catch(() => {});
  }
  await writeFile(
    path.join(dir, 'etc/passwd'),
    'root:x:0:0:root:/root:/bin/sh\napp:x:1000:1000::/home/app:/bin/sh\n',
  );
  await writeFile(path.join(dir, 'etc/group'), 'root:x:0:\napp:x:1000:\n');
  await writeFile(path.join(dir, 'etc/image-marker'), 'from the image\n');
  await writeFile(path.join(dir, 'var/www/index.html'), 'hello from the image\n');
  execFileSync('chown', ['1000:1000', path.join(dir, 'home/app')]);
  await chmod(path.join(dir, 'home/app'), 0o700);
  await shiftOwnership(dir); // as an image unpacked for machines is
  return dir;
}

/** A machine's directories under `dir`: its overlay (mounted) and state directory. */
export interface TestMachine {
  merged: string;
  upper: string;
  stateDir: string;
}

/** Mounts an overlay of `lower` for machine `name` under `dir`. */
export async function makeMachine(dir: string, lower: string, name: string): Promise<TestMachine> {
  const base = path.join(dir, name);
  const m = {
    merged: path.join(base, 'rootfs'),
    upper: path.join(base, 'volume/upper'),
    stateDir: path.join(base, 'state'),
  };
  await mkdir(m.upper, { recursive: true, mode: 0o755 });
  await chown(m.upper, hostId(0), hostId(0)); // machine root's `/`, as prepare.ts makes it
  await mountRootfs({
    lower,
    upper: m.upper,
    work: path.join(base, 'volume/work'),
    merged: m.merged,
  });
  return m;
}

/** The busybox PATH and a plain environment. */
export const ENV = { PATH: '/bin', HOME: '/root' };

/** A test's sandboxes: an image, machines on it, cgroups under a root of the test's own. */
export interface Bed {
  dir: string;
  image: string;
  cgroupRoot: string;
  runDir: string;
  cgroups: CgroupSet;
  sandboxes: Sandboxes;
  /** Makes machine `id` (overlay + cgroup with `limits`) once; its directories. */
  machine(id: string, limits?: CgroupLimits): Promise<TestMachine>;
  /** A spec for machine `id` (made first) running `sh -c script`, as root, with `over` applied. */
  spec(id: string, script: string, over?: Partial<SandboxSpec>): Promise<SandboxSpec>;
  /** Runs `script` in machine `id` to its end; its exit status and output lines. */
  probe(id: string, script: string, over?: Partial<SandboxSpec>): Promise<Probe>;
  /** Stops every sandbox, unmounts, removes cgroups and files. */
  cleanup(): Promise<void>;
}

/** What a probe printed, and how it ended. */
export interface Probe {
  status: ExitStatus;
  out: string[];
  err: string[];
  entries: LogEntry[];
}

/**
 * A bed for the test file tagged `tag` (a few letters, unique among the test files), its
 * sandboxes under `runtime` (default runc).
 */
export async function makeBed(tag: string, runtime?: MachineRuntimeName): Promise<Bed> {
  const dir = await mkdtemp(path.join(os.tmpdir(), `pier-${tag}-`));
  const image = await makeImageRoot(path.join(dir, 'image'));
  const cgroupRoot = `pier-${tag}-${process.pid}`;
  const cgroups = await CgroupSet.detect({ root: cgroupRoot }, (reason) => {
    throw new Error(`cgroups unusable: ${reason}`);
  });
  if (!cgroups) throw new Error('cgroups unusable');
  const runDir = path.join(dir, 'run');
  const sandboxes = new Sandboxes({ cgroups, runDir, ...(runtime ? { runtime } : {}) });
  const machines = new Map<string, TestMachine>();

  const machine = async (id: string, limits: CgroupLimits = {}) => {
    let m = machines.get(id);
    if (!m) {
      m = await makeMachine(dir, image, id);
      machines.set(id, m);
    }
    await cgroups.create(id, limits);
    return m;
  };
  const spec = async (id: string, script: string, over: Partial<SandboxSpec> = {}) => {
    const m = await machine(id);
    return {
      id,
      rootfs: m.merged,
      hostname: id,
      argv: ['/bin/sh', '-c', script],
      env: ENV,
      cwd: '/',
      uid: 0,
      gid: 0,
      mounts: [],
      cgroup: id,
      stateDir: m.stateDir,
      logMaxBytes: 1 << 20,
      ...over,
    } satisfies SandboxSpec;
  };
  const probe = async (id: string, script: string, over: Partial<SandboxSpec> = {}) => {
    const s = await spec(id, script, over);
    const before = (await sandboxes.logs(id).catch(() => undefined))?.cursor ?? 0;
    await sandboxes.run(s);
    const status = await sandboxes.waitExit(id, 20_000);
    const { entries } = await sandboxes.logs(id, { after: before, limit: 100_000 });
    const lines = (stream: string) => entries.filter((e) => e.stream === stream).map((e) => e.text);
    return { status, out: lines('stdout'), err: lines('stderr'), entries };
  };
  const cleanup = async () => {
    for (const [id, m] of machines) {
      await sandboxes.stop(id, { timeoutMs: 1000 }).catch(() => {});
      await unmountRootfs(m.merged).catch(() => {});
      await cgroups.remove(id).catch(() => {});
    }
    for (const d of cgroups.dirs()) await rmdir(d).catch(() => {});
    await rm(dir, { recursive: true, force: true });
  };
  return { dir, image, cgroupRoot, runDir, cgroups, sandboxes, machine, spec, probe, cleanup };
}
