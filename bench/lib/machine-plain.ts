/**
 * The baselines of the machine benchmarks: the very binary a machine runs (the image's
 * /bin/busybox is a copy of this host's, checked by `assertSameBinary`), started with a
 * plain fork+exec — `child_process.spawn`, no shell, no sandbox — as `httpd -f` serving
 * the same page on a free loopback port. Timed from the spawn to the first 200, waited
 * for exactly as the pier side is (`firstOk`).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { Stopwatch, type Sample } from './db-samples.js';
import { BUSYBOX, firstOk, httpGet, PAGE, sha256File } from './machine-pier.js';
import { freePort } from '../../test/helpers/registry.js';

/** A busybox httpd run directly. */
export interface PlainHttpd {
  child: ChildProcess;
  url: string;
  stop(): Promise<void>;
}

/** spawn(busybox httpd -f -p 127.0.0.1:<port> -h <www>) with argv[0] `httpd`, as in the image. */
export function spawnHttpd(www: string, port: number): PlainHttpd {
  const child = spawn(BUSYBOX, ['-f', '-p', `127.0.0.1:${port}`, '-h', www], {
    argv0: 'httpd',
    stdio: 'ignore',
    cwd: '/',
  });
  const exited = new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else child.once('exit', () => resolve());
  });
  return {
    child,
    url: `http://127.0.0.1:${port}${PAGE.path}`,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}

/** One baseline sample: spawn → first 200 (the process is stopped afterwards, untimed). */
export async function plainSample(www: string): Promise<Sample> {
  const port = await freePort();
  const watch = new Stopwatch();
  const httpd = spawnHttpd(www, port);
  try {
    await firstOk(() => httpGet(httpd.url));
    watch.step('spawn → first 200');
    return watch.done();
  } finally {
    await httpd.stop();
  }
}

/**
 * `count` plain httpd spawned at once, timed until every one answered its first 200;
 * all are stopped afterwards (untimed).
 */
export async function plainMany(www: string, count: number): Promise<Sample> {
  const ports: number[] = [];
  while (ports.length < count) {
    const p = await freePort();
    if (!ports.includes(p)) ports.push(p);
  }
  const watch = new Stopwatch();
  const all = ports.map((p) => spawnHttpd(www, p));
  try {
    await Promise.all(all.map((h) => firstOk(() => httpGet(h.url), 60_000)));
    watch.step(`${count} × spawn → first 200`);
    return watch.done();
  } finally {
    await Promise.all(all.map((h) => h.stop()));
  }
}

/**
 * The plain twin of a resume: a running httpd is stopped with SIGSTOP; then SIGCONT and
 * a GET on a new connection are timed until the 200. `samples` of them on one process.
 */
export async function plainStopCont(www: string, samples: number): Promise<Sample[]> {
  const port = await freePort();
  const httpd = spawnHttpd(www, port);
  const out: Sample[] = [];
  try {
    await firstOk(() => httpGet(httpd.url));
    for (let i = 0; i < samples; i++) {
      httpd.child.kill('SIGSTOP');
      await sleep(100);
      const watch = new Stopwatch();
      httpd.child.kill('SIGCONT');
      await firstOk(() => httpGet(httpd.url));
      watch.step('SIGCONT → first 200');
      out.push(watch.done());
    }
    return out;
  } finally {
    await httpd.stop();
  }
}

/** Throws unless the machine's /bin/busybox (through its root) is the host's BUSYBOX. */
export async function assertSameBinary(machineRoot: string): Promise<string> {
  const [inMachine, host] = await Promise.all([
    sha256File(`${machineRoot}/bin/busybox`),
    sha256File(BUSYBOX),
  ]);
  if (inMachine !== host) {
    throw new Error(`the machine's /bin/busybox (${inMachine}) is not ${BUSYBOX} (${host})`);
  }
  return host;
}
