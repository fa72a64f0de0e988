/**
 * The pier side of the machine benchmarks: a real `pier serve` in a process of its own
 * (compiled, lib/machine-build.ts), so that its memory is the platform's alone and the
 * benchmark's client work does not share its event loop; its own data dir, database,
 * bridge and network; a real local OCI registry (`docker-registry`, as the tests start
 * it) holding a busybox image whose `/bin/busybox` is this host's, which the baselines
 * (lib/machine-plain.ts) run directly.
 *
 * `close()` destroys every machine through the API, stops pier, and then makes sure
 * nothing is left even when that failed: the sandboxes' processes (by their records),
 * overlays, network namespaces, cgroups, the storage pool's mount and loop device, the
 * bridge, the database, the registry and the temp dirs.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { chmod, mkdir, mkdtemp, open, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { CgroupSet } from '../../src/host/cgroups/cgroup.js';
import {
  busyboxLayer,
  pushImage,
  type ImageSpec,
} from '../../src/runtime/images/build.test-helper.js';
import {
  isRunning,
  Network,
  sandboxRuntimeDir,
  unmountRootfs,
  type SandboxRecord,
} from '../../src/runtime/sandbox/index.js';
import { forceCleanup } from '../../src/storage/pool/btrfs-env.test-helper.js';
import { freePort, startRegistry, type TestRegistry } from '../../test/helpers/registry.js';
import { pierEntry } from './machine-build.js';
import { call, createBenchOrg, type BenchOrg } from './platform.js';

/**
 * Samples (or cycles) of the benchmarks that time one machine operation at a time
 * (`BENCH_MACHINES_SAMPLES`); read once here so that they all take the same number.
 */
export const MACHINE_SAMPLES = Number(process.env.BENCH_MACHINES_SAMPLES ?? 10);

const MACHINE_POSTGRES = 'postgresql://postgres@127.0.0.1:5432/postgres';
/** The page every machine and every baseline serves. */
export const PAGE = { path: '/index.html', content: 'hello from a machine\n' };
/** The port busybox httpd listens on inside a machine (pier's default internalPort). */
export const INTERNAL_PORT = 3000;
/** The host binary the image's /bin/busybox is a copy of, and what the baselines run. */
export const BUSYBOX = '/bin/busybox';

export interface MachinePier {
  /** `http://127.0.0.1:<port>`: API and proxy (app hosts) on one listener. */
  url: string;
  port: number;
  /** The pid of the `pier serve` process (node, no shell in between). */
  pid: number;
  dataDir: string;
  /** A temp dir of the benchmark's own (baselines' web root...), removed by close(). */
  workDir: string;
  /** Where pier keeps its state in this run, for the report. */
  store: string;
  /** BENCH_PIER_NODE_FLAGS as given to pier's node ('' normally). */
  nodeFlags: string;
  /** The name of pier's database (its backends show it in their command line). */
  databaseName?: string;
  bridge: string;
  cidr: string;
  org: BenchOrg;
  /** The image reference of the web image (busybox httpd on 3000 serving PAGE). */
  image: string;
  /** Pushes another image to the bench's registry; answers its reference. */
  pushImage(name: string, spec: ImageSpec): Promise<string>;
  api(method: string, route: string, body?: unknown, expect?: number): Promise<any>;
  /** POST /v1/apps. */
  createApp(name: string): Promise<void>;
  /** POST /v1/apps/:app/machines (wait=true) with the web image; answers the machine. */
  createMachine(app: string, extra?: Record<string, unknown>): Promise<any>;
  /** The machine's root as the host sees it (the overlay, mounted while it runs). */
  machineRoot(id: string): string;
  /** Sandbox records (`<dataDir>/machines/.run/<id>.json`): the keeper and its sandbox. */
  sandboxRecords(): Promise<SandboxRecord[]>;
  /** The last lines of pier's own log (stdout and stderr of `pier serve`). */
  logTail(lines?: number): Promise<string>;
  /** The platform CA (PEM), as an operator fetches it: to verify its databases. */
  platformCa(): Promise<string>;
  close(): Promise<void>;
}

/** Machine config of every benchmark machine (busybox httpd needs very little). */
export const MACHINE_CONFIG = { memoryMb: 128 };

/**
 * A GET of PAGE through pier's proxy (Host `<app>.127.0.0.1`) on a new connection, as a
 * new visitor would come; node:http, since fetch cannot set Host.
 */
export function proxiedGet(
  pierUrl: string,
  app: string,
): Promise<{ status: number; text: string }> {
  return httpGet(`${pierUrl}${PAGE.path}`, `${app}.127.0.0.1`);
}

/**
 * Whether the machine at `ip` serves PAGE itself: a GET straight to its address over the
 * bridge, past pier's proxy, so that a machine the proxy cannot reach is told apart.
 */
export async function answersOnItsAddress(ip: string): Promise<boolean> {
  const r = await httpGet(`http://${ip}:${INTERNAL_PORT}${PAGE.path}`);
  return r.status === 200 && r.text === PAGE.content;
}

/** A GET on a new connection (no keep-alive), with an optional Host header. */
export function httpGet(url: string, host?: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { agent: false, headers: host ? { host } : {} }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      res.on('error', reject);
    });
    req.on('error', reject);
  });
}

/**
 * Polls `get` until it answers 200 with PAGE: at once, then 1 ms after each refused
 * connection or other answer. Both sides of every comparison wait this same way.
 */
export async function firstOk(
  get: () => Promise<{ status: number; text: string }>,
  timeoutMs = 30_000,
): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  let tries = 0;
  let last = '';
  for (;;) {
    tries++;
    try {
      const r = await get();
      if (r.status === 200) {
        if (r.text !== PAGE.content) throw new Error(`unexpected page: ${JSON.stringify(r.text)}`);
        return tries;
      }
      last = `${r.status} ${r.text.slice(0, 200)}`;
    } catch (err) {
      if ((err as Error).message.startsWith('unexpected page')) throw err;
      last = (err as Error).message;
    }
    if (Date.now() > deadline) throw new Error(`no 200 within ${timeoutMs} ms (last: ${last})`);
    await sleep(1);
  }
}

/** A bridge name and a /16 of 10.0.0.0/8 that no interface or route of this host uses. */
async function pickNetwork(): Promise<{ bridge: string; cidr: string }> {
  const used = new Set<number>();
  for (const args of [
    ['-4', '-o', 'addr', 'show'],
    ['-4', 'route', 'show', 'table', 'all'],
  ]) {
    const out = await runOut('ip', args).catch(() => '');
    for (const m of out.matchAll(/\b10\.(\d{1,3})\.\d{1,3}\.\d{1,3}(\/(\d{1,2}))?/g)) {
      const prefix = m[3] === undefined ? 32 : Number(m[3]);
      if (prefix < 16) {
        // A wider 10.x route: keep out of all of it.
        const span = 2 ** (16 - Math.max(prefix, 8));
        const first = Math.floor(Number(m[1]) / span) * span;
        for (let i = first; i < first + span; i++) used.add(i);
      } else used.add(Number(m[1]));
    }
  }
  const start = 100 + (process.pid % 100);
  for (let k = 0; k < 150; k++) {
    const octet = 100 + ((start - 100 + k) % 150);
    if (!used.has(octet)) {
      return { bridge: `pbm${process.pid % 1_000_000}`, cidr: `10.${octet}.0.0/16` };
    }
  }
  throw new Error('no free 10.x.0.0/16 for the benchmark bridge');
}

function runOut(file: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0 ? resolve(out) : reject(new Error(`${file} ${args.join(' ')}: ${err.trim()}`)),
    );
  });
}

interface Database {
  url: string;
  name: string;
  drop(): Promise<void>;
}

/** A fresh database as lib/platform.ts makes one, or none (pier's embedded store). */
async function pickDatabase(): Promise<{ database?: Database; store: string }> {
  const configured = process.env.PIER_BENCH_DATABASE_URL;
  if (configured)
    return { database: await createDatabase(configured), store: 'PIER_BENCH_DATABASE_URL' };
  const probe = new pg.Client({
    connectionString: MACHINE_POSTGRES,
    connectionTimeoutMillis: 2000,
  });
  const reachable = await probe.connect().then(
    () => true,
    () => false,
  );
  await probe.end().catch(() => {});
  if (reachable)
    return { database: await createDatabase(MACHINE_POSTGRES), store: 'machine PostgreSQL' };
  return { store: 'embedded store' };
}

async function createDatabase(adminUrl: string): Promise<Database> {
  const name = `pier_bench_${randomBytes(6).toString('hex')}`;
  const admin = async (statement: string) => {
    const client = new pg.Client({ connectionString: adminUrl });
    await client.connect();
    try {
      await client.query(statement);
    } finally {
      await client.end();
    }
  };
  await admin(`CREATE DATABASE ${name}`);
  const u = new URL(adminUrl);
  u.pathname = `/${name}`;
  return {
    url: u.toString(),
    name,
    drop: () => admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`),
  };
}

/** The sha256 of a file, hex. */
export function sha256File(file: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const h = createHash('sha256');
    createReadStream(file)
      .on('data', (c) => h.update(c))
      .on('end', () => resolve(h.digest('hex')))
      .on('error', reject);
  });
}

async function waitHealthy(url: string, child: ChildProcess, log: () => Promise<string>) {
  const deadline = Date.now() + 120_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`pier serve exited (${child.exitCode ?? child.signalCode}):\n${await log()}`);
    }
    const ok = await fetch(`${url}/healthz`).then(
      (r) => r.status === 200,
      () => false,
    );
    if (ok) return;
    await sleep(50);
  }
  throw new Error(`pier serve did not answer /healthz in time:\n${await log()}`);
}

/** What a benchmark may set beyond the defaults: pier's port, and settings of its own. */
export interface MachineBenchOptions {
  /** The API's port (a free one if not given), for servers that must know it first. */
  port?: number;
  /** More environment for `pier serve` (PIER_TLS_LISTEN...). */
  env?: Record<string, string>;
  /** More flags for pier's node (`--inspect=127.0.0.1:0` to reach its heap). */
  nodeFlags?: string[];
}

/** Starts everything; `label` names the temp dirs. */
export async function openMachineBench(
  label: string,
  opts: MachineBenchOptions = {},
): Promise<MachinePier> {
  if (process.getuid?.() !== 0) {
    throw new Error('the machine benchmarks need root (runc, netns, cgroups, mounts)');
  }
  const cleanup: (() => Promise<void>)[] = [];
  const closeAll = async () => {
    let failure: unknown;
    for (const step of cleanup.splice(0).reverse()) {
      await step().catch((err: unknown) => (failure ??= err));
    }
    if (failure !== undefined) throw failure;
  };
  try {
    const entry = await pierEntry();
    const workDir = await mkdtemp(path.join(os.tmpdir(), `pier-bench-${label}-`));
    cleanup.push(() => rm(workDir, { recursive: true, force: true }));
    // The service user passes through to the data dir: otherwise pier puts its servers in
    // /var/lib/pier/servers-<hash> (PIER_SERVER_DIR), which this cleanup would not remove.
    await chmod(workDir, 0o711);
    const dataDir = path.join(workDir, 'data');
    await mkdir(dataDir, { mode: 0o711 });

    const registry: TestRegistry = await startRegistry();
    cleanup.push(() => registry.stop());
    await pushImage(registry.url, 'web:1', {
      layers: [
        busyboxLayer(),
        [{ path: 'www/' }, { path: `www${PAGE.path}`, content: PAGE.content }],
      ],
      config: { Cmd: ['/bin/httpd', '-f', '-p', String(INTERNAL_PORT), '-h', '/www'] },
    });
    const image = `${registry.host}/web:1`;

    const { bridge, cidr } = await pickNetwork();
    // Registered before pier starts: the bridge is made on the first machine.
    cleanup.push(() => new Network({ bridge, cidr }).removeBridge());

    const { database, store } = await pickDatabase();
    if (database) cleanup.push(database.drop);

    const port = opts.port ?? (await freePort());
    const url = `http://127.0.0.1:${port}`;
    const operatorToken = randomBytes(24).toString('hex');
    const logFile = path.join(workDir, 'pier.log');
    const logFd = await open(logFile, 'w');
    // The flags bin/pier.js runs node with (its first line), then any of the experiment's.
    const nodeFlags = [
      ...(await binNodeFlags()),
      ...(process.env.BENCH_PIER_NODE_FLAGS ?? '').split(' ').filter(Boolean),
      ...(opts.nodeFlags ?? []),
    ];
    const child = spawn(
      process.execPath,
      [
        ...nodeFlags,
        entry,
        'serve',
        '--listen',
        `127.0.0.1:${port}`,
        '--data-dir',
        dataDir,
        ...(database ? ['--database-url', database.url] : []),
      ],
      {
        stdio: ['ignore', logFd.fd, logFd.fd],
        cwd: workDir,
        env: {
          PATH: process.env.PATH ?? '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
          PIER_OPERATOR_TOKEN: operatorToken,
          PIER_MACHINES_BRIDGE: bridge,
          PIER_MACHINES_CIDR: cidr,
          // The registry is on 127.0.0.1: trusted by name, so pulls pass the outbound guard.
          PIER_TRUSTED_REGISTRIES: registry.host,
          PIER_LOG_LEVEL: process.env.BENCH_PIER_LOG_LEVEL ?? 'info',
          // Any free services port, so a bench runs beside a pier on the default one.
          PIER_SERVICES_PORT: '0',
          PIER_SSH_LISTEN: '127.0.0.1:0',
          // BENCH_MACHINE_RUNTIME=runsc measures machines under gVisor (PIER_MACHINE_RUNTIME).
          ...(process.env.BENCH_MACHINE_RUNTIME
            ? { PIER_MACHINE_RUNTIME: process.env.BENCH_MACHINE_RUNTIME }
            : {}),
          ...opts.env,
        },
      },
    );
    await logFd.close();
    const logTail = async (lines = 40) =>
      (await readFile(logFile, 'utf8').catch(() => '')).trim().split('\n').slice(-lines).join('\n');
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    cleanup.push(() => leftovers(dataDir));
    cleanup.push(async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const done = await Promise.race([exited.then(() => true), sleep(30_000).then(() => false)]);
      if (!done) {
        child.kill('SIGKILL');
        await exited;
      }
    });
    await waitHealthy(url, child, logTail);

    const org = await createBenchOrg({
      url,
      operatorToken,
      dataDir,
      store,
      close: async () => {},
    });
    const api = (method: string, route: string, body?: unknown, expect = 200) =>
      call(url, org.token, method, route, body, expect) as Promise<any>;
    cleanup.push(() => destroyAll(api));

    const runDir = path.join(dataDir, 'machines', '.run');
    return {
      url,
      port,
      pid: child.pid!,
      dataDir,
      workDir,
      store,
      nodeFlags: nodeFlags.join(' '),
      ...(database ? { databaseName: database.name } : {}),
      bridge,
      cidr,
      org,
      image,
      pushImage: async (name, spec) => {
        await pushImage(registry.url, name, spec);
        return `${registry.host}/${name}`;
      },
      api,
      createApp: async (name) => {
        await api('POST', '/v1/apps', { name }, 201);
      },
      createMachine: (app, extra = {}) =>
        api('POST', `/v1/apps/${app}/machines`, { image, ...MACHINE_CONFIG, ...extra }, 201),
      machineRoot: (id) => path.join(dataDir, 'machines', `${id}.root`),
      sandboxRecords: () => sandboxRecords(runDir),
      logTail,
      async platformCa() {
        const res = await fetch(`${url}/admin/v1/ca`, {
          headers: { authorization: `Bearer ${operatorToken}` },
        });
        if (res.status !== 200) throw new Error(`GET /admin/v1/ca answered ${res.status}`);
        return res.text();
      },
      close: closeAll,
    };
  } catch (err) {
    await closeAll().catch(() => {}); // the start-up failure is the one worth reporting
    throw err;
  }
}

/**
 * Opens a machine bench for `label`, writes PAGE into `<workDir>/www` (the baselines' web
 * root) and runs `fn` with both; closes the bench afterwards, also after a failure, so
 * that no benchmark can leave machines, a bridge or a database behind.
 */
export async function withMachineBench<T>(
  label: string,
  fn: (b: MachinePier, www: string) => Promise<T>,
  opts: MachineBenchOptions = {},
): Promise<T> {
  const b = await openMachineBench(label, opts);
  try {
    const www = `${b.workDir}/www`;
    await writePage(www);
    return await fn(b, www);
  } finally {
    await b.close();
  }
}

async function sandboxRecords(runDir: string): Promise<SandboxRecord[]> {
  const out: SandboxRecord[] = [];
  for (const f of await readdir(runDir).catch(() => [] as string[])) {
    if (!f.endsWith('.json')) continue;
    const text = await readFile(path.join(runDir, f), 'utf8').catch(() => '');
    if (text) out.push(JSON.parse(text) as SandboxRecord);
  }
  return out;
}

/** Destroys every machine of every app of the organization, 8 at a time. */
async function destroyAll(api: MachinePier['api']): Promise<void> {
  const apps = (await api('GET', '/v1/apps')) as { name: string }[];
  const ids: string[] = [];
  for (const a of apps) {
    for (const m of (await api('GET', `/v1/apps/${a.name}/machines`)) as { id: string }[]) {
      ids.push(m.id);
    }
  }
  await inBatches(ids, 8, (id) => api('POST', `/v1/machines/${id}/destroy`));
}

/** Runs `fn` over `items`, at most `limit` at a time; the first failure is thrown at the end. */
export async function inBatches<T>(
  items: T[],
  limit: number,
  fn: (item: T) => Promise<unknown>,
): Promise<void> {
  let next = 0;
  let failure: unknown;
  const lane = async () => {
    while (next < items.length) {
      const item = items[next++]!;
      await fn(item).catch((err: unknown) => (failure ??= err));
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, lane));
  if (failure !== undefined) throw failure;
}

/**
 * After pier has stopped: whatever of its machines is still there (the destroys failed,
 * or pier died) is removed by hand, from the records on disk. Then the storage pool.
 */
async function leftovers(dataDir: string): Promise<void> {
  const machinesDir = path.join(dataDir, 'machines');
  const records = await sandboxRecords(path.join(machinesDir, '.run'));
  for (const r of records) {
    for (const p of [r.main, r.init, r.runtime, r.keeper]) {
      if (p && (await isRunning(p))) process.kill(p.pid, 'SIGKILL');
    }
  }
  const ids = new Set(records.map((r) => r.id));
  for (const f of await readdir(machinesDir).catch(() => [] as string[])) {
    if (f.endsWith('.root')) ids.add(f.slice(0, -'.root'.length));
    else if (f.endsWith('.json')) ids.add(f.slice(0, -'.json'.length));
  }
  if (ids.size > 0) {
    await sleep(200); // let the killed processes be reaped before their cgroups go
    const cgroups = await CgroupSet.detect();
    const network = new Network({ bridge: 'unused0', cidr: '10.0.0.0/16' });
    for (const id of ids) {
      await unmountRootfs(path.join(machinesDir, `${id}.root`)).catch(() => {});
      await network.removeNetns(id).catch(() => {});
      await cgroups?.remove(id).catch(() => {});
    }
    console.error(`  (cleaned up ${ids.size} machine(s) pier left behind)`);
  }
  // runc's state and bundles of this data dir's sandboxes, on /run: empty or stale now.
  await rm(sandboxRuntimeDir(path.join(machinesDir, '.run')), { recursive: true, force: true });
  await forceCleanup(dataDir, [path.join(dataDir, 'pool', 'pool.img')]);
}

/** Writes PAGE into `dir` (the baselines' web root), as the image has it in /www. */
export async function writePage(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true });
  await writeFile(path.join(dir, PAGE.path.slice(1)), PAGE.content);
}

/** The node flags on bin/pier.js's `#!/usr/bin/env -S node …` line. */
async function binNodeFlags(): Promise<string[]> {
  const bin = fileURLToPath(new URL('../../bin/pier.js', import.meta.url));
  const first = (await readFile(bin, 'utf8')).split('\n')[0] ?? '';
  const words = first.replace(/^#!\S+\s+(-S\s+)?/, '').split(/\s+/);
  return words.slice(1).filter((w) => w.startsWith('--'));
}
