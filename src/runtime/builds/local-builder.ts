/**
 * Builds images on this host with buildah (see buildah.ts for the isolation), from a
 * checked source archive, into pier's own image store.
 *
 * Each app has a pool volume (`b-<app>`, quota'd at the operator's disk cap) holding its
 * builder storage, which is its layer cache: a rebuild whose Dockerfile steps are
 * unchanged reuses them (the newest build's image stays, see keepNewestOnly). A build works in `work/<build id>/` on that volume (context,
 * secrets, the image layout), removed when it ends, whatever the outcome.
 *
 * Base images are pulled by pier's image store (outbound guard, registry rules, caps)
 * and linked into `/run/pier/build-bases/<build>/<digest>/` as OCI layouts the
 * Dockerfile is rewritten to use.
 * The result is pushed to an OCI layout and imported into the image store, unpacked once
 * under its manifest digest, like a pulled image.
 */
import { createWriteStream, type WriteStream } from 'node:fs';
import {
  chmod,
  mkdir,
  open,
  readdir,
  readFile,
  realpath,
  rm,
  rmdir,
  writeFile,
} from 'node:fs/promises';
import path from 'node:path';
import type { CgroupSet } from '../../host/cgroups/cgroup.js';
import type { PoolHandle } from '../../storage/pool-handle.js';
import { ImageError, type ImageStore } from '../images/index.js';
import type { BuildNetwork } from '../runtime.js';
import { seccompProfile } from '../sandbox/seccomp.js';
import {
  budArgs,
  pushArgs,
  rmAllArgs,
  rmiArgs,
  runBuildah,
  type BuildahExit,
  type BuildahRun,
  type BuildahStorage,
  type BuildLimits,
} from './buildah.js';
import { capEvents } from './cap-events.js';
import { DockerfileError, rewriteBases } from './dockerfile-bases.js';
import { killProcessesNaming } from './leftovers.js';
import { unpackSource } from './source-archive.js';

export type { BuildLimits } from './buildah.js';

/** One build to make. */
export interface BuildSpec {
  /** `bld-…`: names the work directory and the image. */
  id: string;
  /** Whose layer cache the build uses (the app's id). */
  cache: string;
  /** The checked source archive. */
  source: string;
  /** The Dockerfile: a path inside the source, or the text of a generated one. */
  dockerfile: { path: string } | { text: string };
  /** Build secrets by id (RUN --mount=type=secret,id=NAME). */
  secrets: Record<string, string>;
  /** Where the builder's output is appended. */
  logFile: string;
  signal?: AbortSignal;
  /**
   * Awaited once a RUN step runs (buildah and runc under way): the job's crash point of
   * the kill -9 harness (src/jobs/crash-points.ts), where `pier serve` dies mid-build.
   */
  building?: () => Promise<void>;
}

/** Why a build failed, in words for its owner. */
export class BuildFailure extends Error {
  override name = 'BuildFailure';
}

export interface LocalBuilderOptions {
  pool: PoolHandle;
  /** The host's cgroups (null: none usable, and builds are refused). */
  cgroups: () => Promise<CgroupSet | undefined>;
  images: ImageStore;
  limits: BuildLimits;
  log: { info(obj: object, msg: string): void; warn(obj: object, msg: string): void };
  /**
   * Lends a build's RUN steps a network behind the machines' walls (the machines
   * runtime's buildNetwork); without it they have none (buildah.ts).
   */
  network?: (buildId: string) => Promise<BuildNetwork>;
}

const MIB = 1024 * 1024;

/** A RUN instruction (at the start of a line, as the Dockerfile grammar wants it). */
const RUN_STEP = /^\s*(ONBUILD\s+)?RUN\b/im;

/** How often a running build's refused forks are counted. */
const FORK_WATCH_MS = 500;
/**
 * A fork bomb, cut: forks refused at the process cap in FORK_BOMB_LOOKS of the last
 * FORK_WINDOW_LOOKS looks (4 s of 6 s). A step that briefly forks past the cap (a loop, a
 * parallel `make`) is refused in a look or two and goes on; a bomb churns at the cap.
 */
const FORK_WINDOW_LOOKS = 12;
const FORK_BOMB_LOOKS = 8;
/** What buildah prints when a RUN step's process was killed (SIGKILL: 128 + 9 in a shell). */
const STEP_KILLED = /container exited on killed|exit status 137/;
/** What a write refused by the volume's quota (or a full pool) prints. */
const DISK_FULL = /Disk quota exceeded|No space left on device/;

/** The last `bytes` of `file` (text). */
async function readTail(file: string, bytes: number): Promise<string> {
  const fh = await open(file, 'r').catch(() => undefined);
  if (!fh) return '';
  try {
    const { size } = await fh.stat();
    const buf = Buffer.alloc(Math.min(bytes, size));
    await fh.read(buf, 0, buf.length, size - buf.length);
    return buf.toString('utf8');
  } finally {
    await fh.close();
  }
}

/**
 * Where base images are laid out for buildah (links into the image store: tiny). Not in
 * the data dir: buildah names an `oci:` image after its path, and refuses a path with
 * capital letters, which a data dir may have.
 */
const BASES_DIR = '/run/pier/build-bases';
/**
 * Each build's own places for buildah's RUN bundles (TMPDIR) and runc's state of the RUN
 * containers, removed with the build, rather than /var/tmp itself and the host's
 * /run/runc, where a build killed at its cap would leave them. Short and outside the data
 * dir: runc's sockets have a path length limit, and the remapped root of a RUN container
 * must be able to pass through to its bundle (so bundles stay under the open /var/tmp).
 */
const BUNDLES_DIR = '/var/tmp';
const RUNC_STATE_DIR = '/run/pier/build-runc';
/** In the app's build volume while a build of it has not ended well (see buildNow). */
const UNFINISHED_MARKER = 'unfinished-build';
/**
 * The empty read-only tree a RUN step with a lent network has as /sys (buildah.ts), with
 * the one directory buildah mounts on inside it (the step's cgroup).
 */
const EMPTY_SYS_DIR = '/run/pier/build-sys';

/** The cache volume's name for `cache`: `b-` and the id's safe characters. */
export function cacheVolume(cache: string): string {
  return `b-${cache.toLowerCase().replace(/[^a-z0-9-]/g, '')}`.slice(0, 100);
}

/** What the builds service needs of a builder. */
export interface SourceBuilder {
  build(spec: BuildSpec): Promise<{ digest: string }>;
  /** Removes a built image from the image store (the caller checked nothing runs it). */
  removeImage(digest: string): Promise<void>;
  /** Removes an app's layer cache (its volume), once the app is gone. */
  removeCache(cache: string): Promise<void>;
}

export class LocalBuilder implements SourceBuilder {
  /** The build running (or last run) per cache: builds of one app run one at a time. */
  private readonly tails = new Map<string, Promise<unknown>>();
  /** Aborted when the cache's app is deleted: its builds stop. */
  private readonly stops = new Map<string, AbortController>();

  constructor(private readonly opts: LocalBuilderOptions) {}

  /**
   * Builds `spec`; resolves with the image's manifest digest in the store. Builds of one
   * app wait for each other: they share its layer storage, and each starts by clearing
   * what a build killed with `pier serve` left in it (leftovers.ts).
   */
  build(spec: BuildSpec): Promise<{ digest: string }> {
    const before = this.tails.get(spec.cache) ?? Promise.resolve();
    let stop = this.stops.get(spec.cache);
    if (!stop) this.stops.set(spec.cache, (stop = new AbortController()));
    const signal = spec.signal ? AbortSignal.any([spec.signal, stop.signal]) : stop.signal;
    const mine = before
      .catch(() => undefined)
      .then(() => {
        signal.throwIfAborted();
        return this.buildNow({ ...spec, signal });
      });
    const tail = mine.catch(() => undefined);
    this.tails.set(spec.cache, tail);
    void tail.then(() => {
      if (this.tails.get(spec.cache) !== tail) return;
      this.tails.delete(spec.cache);
      this.stops.delete(spec.cache);
    });
    return mine;
  }

  async removeImage(digest: string): Promise<void> {
    await this.opts.images.remove(digest);
  }

  async removeCache(cache: string): Promise<void> {
    // The app's builds stop (each removes its own work), then its storage goes.
    this.stops.get(cache)?.abort(new BuildFailure('The app was deleted.'));
    await this.tails.get(cache);
    const { pool } = await this.opts.pool.get();
    const name = cacheVolume(cache);
    const volume = await pool.info(name);
    if (!volume) return;
    // A build killed with pier may still run on it.
    await killProcessesNaming([path.join(volume.path, 'storage')]);
    await pool.destroy(name);
  }

  private async buildNow(spec: BuildSpec): Promise<{ digest: string }> {
    const started = performance.now();
    const { pool } = await this.opts.pool.get();
    const name = cacheVolume(spec.cache);
    const volume =
      (await pool.info(name)) ??
      (await pool.create(name, { quotaBytes: Math.round(this.opts.limits.diskGb * 1024 * MIB) }));
    const storage: BuildahStorage = {
      root: path.join(volume.path, 'storage'),
      runroot: path.join(volume.path, 'run'),
    };
    const work = path.join(volume.path, 'work', spec.id);
    const cgroups = await this.opts.cgroups();
    if (!cgroups) throw new BuildFailure('This host has no cgroups to hold a build in.');
    const group = `build-${spec.id.toLowerCase().replace(/[^a-z0-9-]/g, '')}`;
    const bases = path.join(BASES_DIR, spec.id.toLowerCase());
    const scratch = path.join(BUNDLES_DIR, `pier-${spec.id.toLowerCase()}`);
    const runcRoot = path.join(RUNC_STATE_DIR, spec.id.toLowerCase());
    // Each build marks the app's storage until it has ended well. Only a build that did
    // not (pier killed in the middle, a cap, a failure) can have left buildah, its RUN
    // container, runc state, bundles or working containers (leftovers.ts): they are
    // looked for then, and a clean history costs no scan of /proc and no `buildah rm`.
    const marker = path.join(volume.path, UNFINISHED_MARKER);
    const unclean = (await readFile(marker, 'utf8').catch(() => undefined)) !== undefined;
    if (unclean) {
      await killProcessesNaming([storage.root, runcRoot]);
      await killCgroup(cgroups, group);
    }
    for (const dir of [work, bases, scratch, runcRoot])
      await rm(dir, { recursive: true, force: true });
    await writeFile(marker, `${spec.id}\n`);
    const context = path.join(work, 'context');
    await mkdir(context, { recursive: true, mode: 0o700 });
    const { limits } = this.opts;
    // Only the limits this host enforces (a v1 host may lack one controller or another).
    const wanted = { memoryBytes: limits.memoryMb * MIB, cpuQuota: limits.cpus, pids: limits.pids };
    await cgroups.create(
      group,
      Object.fromEntries(Object.entries(wanted).filter(([k]) => cgroups.supports.has(k as never))),
    );
    const killGroup = () => void killCgroup(cgroups, group);
    const log = createWriteStream(spec.logFile, { flags: 'a', mode: 0o600 });
    const deadline = Date.now() + this.opts.limits.timeoutS * 1000;
    let ended = false;
    let lending: Promise<BuildNetwork | undefined> | undefined;
    let released: Promise<void> | undefined;
    try {
      // Passable (not readable) by the remapped root of the RUN containers.
      await mkdir(scratch, { mode: 0o711 });
      const leftover = { log, deadline, scratch };
      // Each phase's time goes into the log, as a builder's own output shows it.
      let phase = started;
      const took = (what: string) => {
        const now = performance.now();
        log.write(`pier: ${what} (${Math.round(now - phase)} ms)\n`);
        phase = now;
      };
      took('build storage ready');
      if (unclean) {
        await runBuildah(rmAllArgs(storage), leftover).catch(() => undefined);
        took('what an unfinished build left removed');
      }
      await unpackSource(spec.source, context);
      const original = await this.dockerfileText(spec, context);
      // The RUN steps' network is lent for the length of `bud` only, and only to a
      // Dockerfile that has a RUN step (nothing else runs code: base images come as OCI
      // layouts, whose ONBUILD triggers buildah ignores). It is made while the base images
      // are pulled (rewriting FROM lines adds or removes no RUN step).
      lending = RUN_STEP.test(original) ? this.lendNetwork(spec.id) : undefined;
      // Awaited below; a failure before then must not go unhandled meanwhile.
      lending?.catch(() => undefined);
      const { text } = await rewriteBases(original, (ref) =>
        this.baseLayout(ref, bases, log, spec.signal),
      );
      const dockerfile = path.join(work, 'Dockerfile');
      await writeFile(dockerfile, text);
      took('source and base images ready');
      const secrets = await this.writeSecrets(work, spec.secrets);
      const seccompFile = path.join(work, 'seccomp.json');
      await writeFile(seccompFile, JSON.stringify(seccompProfile()));
      // One name per app's storage, moved by each build (they run one at a time): the
      // newest build's image and the layers under it are the cache of the next.
      const tag = 'localhost/pier-build/newest';
      const net = await lending;
      // A step that keeps forking past the process cap is a fork bomb: cut at once rather
      // than left to churn until the time cap.
      const cut = new AbortController();
      const seen = { refusals: 0, looks: [] as boolean[] };
      const watch = setInterval(
        () => void this.watchForks(cgroups, group, cut, seen),
        FORK_WATCH_MS,
      );
      let bud;
      try {
        const budSignal = spec.signal ? AbortSignal.any([spec.signal, cut.signal]) : cut.signal;
        const budRun = runBuildah(
          budArgs({
            storage,
            dockerfile,
            context,
            tag,
            secrets,
            seccompFile,
            // A child of the build's group: runc writes buildah's own defaults into the
            // group it is given, so pier's caps sit on the parent, over all RUN steps.
            cgroupParent: `${cgroups.path(group)}/run`,
            runcRoot,
            iidFile: path.join(work, 'image-id'),
            limits,
            ...(net ? { network: { ...budNetwork(net), emptySys: EMPTY_SYS_DIR } } : {}),
          }),
          { log, deadline, signal: budSignal, onKill: killGroup, scratch },
        );
        if (spec.building && (await firstContainer(runcRoot, budRun))) await spec.building();
        bud = await budRun;
      } finally {
        clearInterval(watch);
        // Given back while the image is exported (awaited before the build ends).
        released = net?.release();
      }
      if (bud.timedOut) {
        throw new BuildFailure(
          `The build ran past its time cap of ${this.opts.limits.timeoutS} s.`,
        );
      }
      if (cut.signal.aborted) throw cut.signal.reason;
      spec.signal?.throwIfAborted();
      if (bud.code !== 0) throw await this.whyFailed(bud, cgroups, group, log, spec.logFile);
      took('built');
      const out = path.join(work, 'image');
      const run = { log, deadline, signal: spec.signal, scratch };
      const push = await runBuildah(pushArgs(storage, tag, out), run);
      if (push.code !== 0) throw new BuildFailure('The built image could not be exported.');
      took('exported');
      // The build before's image leaves the app's storage while this one is imported: one
      // works in buildah's storage, the other reads the layout just written.
      const [imported, kept] = await Promise.allSettled([
        this.opts.images.importLayout(
          out,
          `build/${spec.id}`,
          spec.signal ? { signal: spec.signal } : {},
        ),
        this.keepNewestOnly(volume.path, path.join(work, 'image-id'), storage, run),
      ]);
      if (kept.status === 'rejected')
        this.opts.log.warn(
          { build: spec.id, err: (kept.reason as Error).message },
          'the build before stays in the layer cache',
        );
      if (imported.status === 'rejected') {
        const err: unknown = imported.reason;
        if (err instanceof ImageError)
          throw new BuildFailure(`The built image was refused (${err.code}): ${err.message}`);
        throw err;
      }
      const image = imported.value;
      took('imported into the image store');
      log.write(`pier: image ${image.digest}\n`);
      ended = true;
      return { digest: image.digest };
    } catch (err) {
      if (err instanceof DockerfileError) throw new BuildFailure(err.message);
      if (err instanceof Error && err.name === 'SourceArchiveError')
        throw new BuildFailure(err.message);
      throw err;
    } finally {
      // A network lent while a base image failed to pull was never used: given back too.
      released ??= lending?.then((net) => net?.release()).catch(() => undefined);
      await released?.catch((err: Error) =>
        this.opts.log.warn({ build: spec.id, err: err.message }, 'build network not released'),
      );
      await new Promise<void>((resolve) => log.end(resolve));
      await killCgroup(cgroups, group);
      await rm(work, { recursive: true, force: true }).catch(() => undefined);
      await rm(bases, { recursive: true, force: true }).catch(() => undefined);
      await rm(scratch, { recursive: true, force: true }).catch(() => undefined);
      await rm(runcRoot, { recursive: true, force: true }).catch(() => undefined);
      if (ended) await rm(marker, { force: true }).catch(() => undefined);
    }
  }

  /**
   * The network the RUN steps of build `id` join, when there is a lender, and the empty
   * /sys they get with it (made once; read-only for everyone).
   */
  /**
   * The app's storage keeps the newest build's image (tagged, with the layers under it:
   * the cache of the next build) and removes the one before it, with the intermediate
   * images only it stood on. Its id is kept in the volume from build to build.
   */
  private async keepNewestOnly(
    volumeDir: string,
    iidFile: string,
    storage: BuildahStorage,
    run: BuildahRun,
  ): Promise<void> {
    const record = path.join(volumeDir, 'newest-image');
    const newest = (await readFile(iidFile, 'utf8').catch(() => '')).trim();
    const before = (await readFile(record, 'utf8').catch(() => '')).trim();
    if (before && before !== newest)
      await runBuildah(rmiArgs(storage, before), run).catch(() => undefined);
    if (newest) await writeFile(record, newest);
  }

  private async lendNetwork(id: string): Promise<BuildNetwork | undefined> {
    if (!this.opts.network) return undefined;
    await mkdir(path.join(EMPTY_SYS_DIR, 'fs', 'cgroup'), { recursive: true, mode: 0o555 });
    return this.opts.network(id);
  }

  /** Cuts the build once its steps keep having forks refused (see FORK_BOMB_LOOKS). */
  private async watchForks(
    cgroups: CgroupSet,
    group: string,
    cut: AbortController,
    seen: { refusals: number; looks: boolean[] },
  ) {
    const { forkRefusals } = await capEvents(cgroups.dirs(group));
    seen.looks.push(forkRefusals > seen.refusals);
    seen.looks = seen.looks.slice(-FORK_WINDOW_LOOKS);
    seen.refusals = Math.max(seen.refusals, forkRefusals);
    if (seen.looks.filter(Boolean).length < FORK_BOMB_LOOKS || cut.signal.aborted) return;
    cut.abort(
      new BuildFailure(
        `A RUN step kept forking past the build's process cap of ${this.opts.limits.pids} (a fork bomb); the build was stopped.`,
      ),
    );
  }

  /**
   * Why buildah failed, in words: the cap a RUN step ran into (memory and processes from
   * the kernel's counters of the build's group, disk from the builder's own message, as
   * the quota of the app's volume refuses a write), else its exit.
   */
  private async whyFailed(
    bud: BuildahExit,
    cgroups: CgroupSet,
    group: string,
    log: WriteStream,
    logFile: string,
  ): Promise<BuildFailure> {
    const { limits } = this.opts;
    const events = await capEvents(cgroups.dirs(group));
    // Everything written so far reaches the file before it is read.
    await new Promise<void>((resolve) => log.write('', () => resolve()));
    const tail = await readTail(logFile, 64 * 1024);
    // Killed by the kernel at the cap (v2 counts it; on v1, a step killed while the
    // group was at its cap, which buildah reports as "exited on killed" or status 137).
    if (events.oomKills > 0 || (events.memoryAtCap > 0 && STEP_KILLED.test(tail))) {
      return new BuildFailure(
        `A RUN step ran out of memory: the build's memory cap is ${limits.memoryMb} MiB.`,
      );
    }
    if (DISK_FULL.test(tail)) {
      return new BuildFailure(
        `The build ran out of disk: an app's builds (its layer cache and work) may use ${limits.diskGb} GiB.`,
      );
    }
    const exit = `exit ${bud.code ?? bud.signal}`;
    if (events.forkRefusals > 0) {
      return new BuildFailure(
        `The builder failed (${exit}) after a RUN step hit the build's process cap of ${limits.pids}; see the build's logs.`,
      );
    }
    return new BuildFailure(`The builder failed (${exit}); see the build's logs.`);
  }

  /** The Dockerfile's text: generated, or read from inside the context (never through a link out). */
  private async dockerfileText(spec: BuildSpec, context: string): Promise<string> {
    if ('text' in spec.dockerfile) return spec.dockerfile.text;
    const want = path.join(context, spec.dockerfile.path);
    const real = await realpath(want).catch(() => undefined);
    const root = await realpath(context);
    if (!real || !real.startsWith(`${root}/`)) {
      throw new BuildFailure(`The source has no ${spec.dockerfile.path}.`);
    }
    const text = await readFile(real, 'utf8').catch(() => undefined);
    if (text === undefined) throw new BuildFailure(`${spec.dockerfile.path} cannot be read.`);
    return text;
  }

  /** Pulls `ref` through the image store and lays it out for the builder. */
  private async baseLayout(
    ref: string,
    basesDir: string,
    log: WriteStream,
    signal?: AbortSignal,
  ): Promise<string> {
    log.write(`pier: pulling ${ref}\n`);
    let image;
    try {
      image = await this.opts.images.pull(ref, signal ? { signal } : {});
    } catch (err) {
      if (err instanceof ImageError) {
        throw new BuildFailure(
          `The base image ${ref} could not be pulled (${err.code}): ${err.message}`,
        );
      }
      throw err;
    }
    const dir = path.join(basesDir, image.digest.slice('sha256:'.length));
    await mkdir(basesDir, { recursive: true, mode: 0o700 });
    if (!(await this.opts.images.exportLayout(image.digest, dir))) {
      throw new BuildFailure(`The base image ${ref} left the store while the build began.`);
    }
    return dir;
  }

  /** Writes each secret to a file of its own (0600, root's), for `--secret id=,src=`. */
  private async writeSecrets(
    work: string,
    secrets: Record<string, string>,
  ): Promise<{ id: string; file: string }[]> {
    const dir = path.join(work, 'secrets');
    await mkdir(dir, { mode: 0o700 });
    await chmod(dir, 0o700);
    return Promise.all(
      Object.entries(secrets).map(async ([id, value], i) => {
        const file = path.join(dir, String(i));
        await writeFile(file, value, { mode: 0o600 });
        return { id, file };
      }),
    );
  }
}

/** What buildah needs of a lent network. */
function budNetwork(net: BuildNetwork): { netnsPath: string; dns?: string } {
  return { netnsPath: net.netnsPath, ...(net.dns ? { dns: net.dns } : {}) };
}

/**
 * Resolves true once runc holds a container of the build (a RUN step runs: its state
 * directory appears in the build's runc root), false when buildah ended first.
 */
async function firstContainer(runcRoot: string, bud: Promise<unknown>): Promise<boolean> {
  let ended = false;
  void bud.finally(() => (ended = true)).catch(() => undefined);
  while (!ended) {
    const names = await readdir(runcRoot).catch(() => [] as string[]);
    if (names.length > 0) return true;
    await new Promise((r) => setTimeout(r, 100));
  }
  return false;
}

/** The pids in `dir` and every cgroup below it. */
async function pidsBelow(dir: string): Promise<number[]> {
  const own = await readFile(path.join(dir, 'cgroup.procs'), 'utf8').catch(() => '');
  const pids = own.split('\n').filter(Boolean).map(Number);
  const children = await readdir(dir, { withFileTypes: true }).catch(() => []);
  for (const c of children)
    if (c.isDirectory()) pids.push(...(await pidsBelow(path.join(dir, c.name))));
  return pids;
}

/** Removes the (empty) cgroups below `dir`, deepest first. */
async function removeBelow(dir: string): Promise<void> {
  const children = await readdir(dir, { withFileTypes: true }).catch(() => []);
  for (const c of children) {
    if (!c.isDirectory()) continue;
    await removeBelow(path.join(dir, c.name));
    await rmdir(path.join(dir, c.name)).catch(() => undefined);
  }
}

/** Kills whatever is left in the build's cgroup tree and removes it (a few tries while they die). */
async function killCgroup(cgroups: CgroupSet, group: string): Promise<void> {
  for (let i = 0; i < 50; i++) {
    for (const dir of cgroups.dirs(group)) {
      for (const pid of await pidsBelow(dir)) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // gone already
        }
      }
      await removeBelow(dir);
    }
    if (await cgroups.remove(group).catch(() => false)) return;
    await new Promise((r) => setTimeout(r, 100));
  }
}
