/**
 * What the local runtime tests share: a real registry to push busybox images to, an
 * ImageStore, a DirectoryPool, cgroups and a bridge of the test file's own, and a
 * LocalRuntime over them; machine specs with defaults; cleanup of everything.
 */
import { access, mkdtemp, rm, rmdir } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { CgroupSet } from '../../host/cgroups/cgroup.js';
import { OutboundGuard } from '../../host/outbound-guard.js';
import { DirectoryPool } from '../../storage/pool/directory-pool.js';
import { startRegistry, type TestRegistry } from '../../../test/helpers/registry.js';
import { busyboxLayer, pushImage, type ImageSpec } from '../images/build.test-helper.js';
import { ImageStore } from '../images/index.js';
import type { GuestSession, MachineSpec } from '../runtime.js';
import { Network } from '../sandbox/index.js';
import { sandboxUnavailable } from '../sandbox/testbed.test-helper.js';
import { LocalRuntime, type LocalRuntimeOptions } from './local-runtime.js';

/** Why these tests cannot run here, or undefined. */
export async function runtimeUnavailable(): Promise<string | undefined> {
  const why = await sandboxUnavailable();
  if (why) return why;
  const ok = await access('/usr/bin/docker-registry').then(
    () => true,
    () => false,
  );
  return ok ? undefined : 'docker-registry is not installed';
}

/** /etc/passwd and /etc/group with root and `app` (1000), over busybox's. */
export const APP_USER_FILES = [
  {
    path: 'etc/passwd',
    content: 'root:x:0:0:root:/root:/bin/sh\napp:x:1000:1000::/home/app:/bin/sh\n',
  },
  { path: 'etc/group', content: 'root:x:0:\napp:x:1000:\n' },
  { path: 'home/app/', type: 'dir' as const, uid: 1000, gid: 1000 },
];

/** One test file's runtime and everything under it. */
export interface RuntimeBed {
  dir: string;
  registry: TestRegistry;
  images: ImageStore;
  pool: DirectoryPool;
  cgroups: CgroupSet;
  options: LocalRuntimeOptions;
  runtime: LocalRuntime;
  warnings: string[];
  /** Pushes `image` as `<name>:1`; its reference. */
  push(name: string, image: ImageSpec): Promise<string>;
  /** A spec for machine `mch-<tag>-<name>`, booting by `boot` unless `over` says otherwise. */
  spec(name: string, image: string, over?: Partial<MachineSpec>): MachineSpec;
  /** The console output of machine `id` so far, one line each. */
  output(id: string): Promise<string>;
  /** Polls until the console output of `id` contains `text`. */
  waitOutput(id: string, text: string, ms?: number): Promise<string>;
  cleanup(): Promise<void>;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * A bed for the test file tagged `tag` (two letters), with its own bridge on `cidr`;
 * `extra` adds runtime options (walls).
 */
export async function makeRuntimeBed(
  tag: string,
  cidr: string,
  extra: Pick<LocalRuntimeOptions, 'walls'> = {},
): Promise<RuntimeBed> {
  const dir = await mkdtemp(path.join(os.tmpdir(), `pier-${tag}-`));
  const registry = await startRegistry();
  // The local registry is on 127.0.0.1: trusted by name, as PIER_TRUSTED_REGISTRIES would.
  const images = new ImageStore({
    dir: path.join(dir, 'images'),
    guard: new OutboundGuard({ trusted: [registry.host] }),
  });
  const pool = await DirectoryPool.open({ dir: path.join(dir, 'pool') });
  const probe = await CgroupSet.probe({ root: `pier-test-${tag}-${process.pid}` });
  if (!probe.set) throw new Error(`cgroups unusable: ${probe.reason}`);
  const cgroups = probe.set;
  const warnings: string[] = [];
  const options: LocalRuntimeOptions = {
    dataDir: path.join(dir, 'data'),
    pool,
    images,
    cgroups,
    network: { bridge: `pier-${tag}${process.pid}`.slice(0, 15), cidr },
    log: { info: () => {}, warn: (_o, msg) => warnings.push(msg) },
    ...extra,
  };
  const runtime = new LocalRuntime(options);
  const ids = new Set<string>();

  const output = async (id: string) => {
    const page = await runtime.logs(id, { after: 0, limit: 100_000 });
    return page.entries.map((e) => e.text).join('\n');
  };
  return {
    dir,
    registry,
    images,
    pool,
    cgroups,
    options,
    runtime,
    warnings,
    async push(name, image) {
      await pushImage(registry.url, `${name}:1`, image);
      return `${registry.host}/${name}:1`;
    },
    spec(name, image, over = {}) {
      const id = `mch-${tag}-${name}`;
      ids.add(id);
      return {
        id,
        image,
        vcpus: 1,
        memoryMb: 256,
        diskMb: 512,
        env: {},
        internalPort: 3000,
        readiness: 'boot',
        killTimeoutS: 5,
        volumes: [],
        hostname: name,
        network: { group: tag },
        ...over,
      };
    },
    output,
    async waitOutput(id, text, ms = 5000) {
      const end = Date.now() + ms;
      for (;;) {
        const out = await output(id);
        if (out.includes(text)) return out;
        if (Date.now() > end)
          throw new Error(`${id} never printed ${JSON.stringify(text)}:\n${out}`);
        await sleep(25);
      }
    },
    async cleanup() {
      for (const id of ids) await runtime.destroy(id).catch(() => {});
      await runtime.close();
      await new Network(options.network).removeBridge().catch(() => {});
      for (const d of cgroups.dirs()) await rmdir(d).catch(() => {});
      await registry.stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** Runs a session to its end (with `input` on stdin if given); its output per stream and how it ended. */
export function finishSession(s: GuestSession, input?: string) {
  const out = { stdout: '', stderr: '' };
  s.onData((stream, d) => (out[stream] += d.toString()));
  if (input !== undefined) {
    s.write(Buffer.from(input));
    s.end();
  }
  return new Promise<{
    stdout: string;
    stderr: string;
    code: number | null;
    signal: string | null;
  }>((resolve) => s.onExit((code, signal) => resolve({ ...out, code, signal })));
}

/** The busybox layer with everything the tests run (the default applets). */
export const busybox = () => busyboxLayer();
