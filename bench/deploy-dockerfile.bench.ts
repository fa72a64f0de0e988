/**
 * A small Dockerfile app from source to its first proxied 200 (issue 25, "Benchmarks"):
 * `FROM` a busybox base in the bench's registry, a `RUN` step standing for installing the
 * dependencies (a second or so of shell), `COPY index.html`, `CMD httpd`. pier:
 * upload the source, build it, deploy `build:<id>` while GETs through the proxy wait for
 * the new page (the first 200 of the new release, before the deploy has retired the old
 * release's machine and ended): the API steps `pier deploy` takes. Baseline, in the same run, first: the
 * same Dockerfile and context through `buildah bud` by hand (lib/buildah-plain.ts, the
 * base as an OCI layout), then a plain fork+exec of the image's command (busybox httpd on
 * the same page, lib/machine-plain.ts) until its first 200. Goal: pier ≤ 1.3 × baseline.
 *
 * Then one source change (index.html) and the same steps again: the rebuild uses the
 * app's layer cache (and the base image already in pier's store). Goal: the rebuild's
 * build ≤ 0.5 × the first build's. The baseline's own rebuild is reported for context.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { sourceArchive } from '../test/builds/archive.js';
import { busyboxLayer, type ImageSpec } from '../src/runtime/images/build.test-helper.js';
import { compare, type Benchmark } from './lib/benchmark.js';
import { buildahBud, writeOciLayout } from './lib/buildah-plain.js';
import { asLoad, describeSample, round, Stopwatch, type Sample } from './lib/db-samples.js';
import { buildAndWait, deployAndWait, untilServes, uploadSource } from './lib/deploy-ops.js';
import { freePort } from '../test/helpers/registry.js';
import {
  httpGet,
  INTERNAL_PORT,
  MACHINE_CONFIG,
  proxiedGet,
  withMachineBench,
  type MachinePier,
} from './lib/machine-pier.js';
import { machineBusy } from './lib/s3-load.js';
import { spawnHttpd } from './lib/machine-plain.js';

const GOAL_RATIO = 1.3;
const GOAL_REBUILD = 0.5;
const APP = 'site';
const BASE: ImageSpec = { layers: [busyboxLayer()], config: { Cmd: ['/bin/sh'] } };

function dockerfile(from: string): string {
  return [
    `FROM ${from}`,
    // The dependencies' step (as `npm ci` would be): a second or so of work before the
    // source is copied, which a rebuild after a source change takes from the layer cache.
    'RUN i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; echo $i > /deps',
    'COPY index.html /www/index.html',
    `CMD ["/bin/httpd", "-f", "-p", "${INTERNAL_PORT}", "-h", "/www"]`,
    '',
  ].join('\n');
}

/** Upload, build, deploy `build:<id>`, first proxied 200 of `page`. */
async function pierSample(b: MachinePier, from: string, page: string): Promise<Sample> {
  const tgz = sourceArchive({ Dockerfile: dockerfile(from), 'index.html': page });
  const watch = new Stopwatch();
  const source = await uploadSource(b, APP, tgz);
  watch.step('upload');
  const build = await buildAndWait(b, APP, source);
  watch.step('build');
  // Where the build's time went, by its own record: waiting for its job, then the builder.
  const at = (t: string) => Date.parse(t);
  console.log(
    `    build: queued ${at(build.startedAt) - at(build.createdAt)} ms, ` +
      `building ${at(build.finishedAt) - at(build.startedAt)} ms`,
  );
  // The build's phases, as its log times them (`pier: … (N ms)`).
  const log = await fetch(`${b.url}/v1/builds/${build.id}/logs`, {
    headers: { authorization: `Bearer ${b.org.token}` },
  }).then((r) => r.text());
  const phases = [...log.matchAll(/^pier: (.+) \((\d+) ms\)$/gm)].map((m) => `${m[1]} ${m[2]} ms`);
  console.log(`    build phases: ${phases.join(', ')}`);
  const steps: string[] = [];
  // The new page is asked for from the deploy's start: the release serves once the proxy
  // moves to it, before the deploy retires the old release's machine and ends.
  const served = untilServes(() => proxiedGet(b.url, APP), page, 120_000);
  const deployed = deployAndWait(
    b,
    APP,
    { image: `build:${build.id}`, config: { ...MACHINE_CONFIG, killTimeoutS: 1 } },
    steps,
  );
  await Promise.race([served, deployed.then(() => served)]);
  watch.step('deploy → first 200');
  await deployed;
  console.log(`    deploy: ${steps.join(' → ')}`);
  return watch.done();
}

/** buildah bud by hand, then busybox httpd on the page (the image's CMD) → first 200. */
async function plainSample(work: string, layout: string, page: string, n: number) {
  const context = path.join(work, `context-${n}`);
  await mkdir(context, { recursive: true });
  await writeFile(path.join(context, 'Dockerfile'), dockerfile(`oci:${layout}`));
  await writeFile(path.join(context, 'index.html'), page);
  const port = await freePort();
  const watch = new Stopwatch();
  await buildahBud(path.join(work, 'buildah'), context, `localhost/site:${n}`);
  watch.step('buildah bud');
  const httpd = spawnHttpd(context, port);
  try {
    await untilServes(() => httpGet(httpd.url), page);
    watch.step('spawn → first 200');
    return watch.done();
  } finally {
    await httpd.stop();
  }
}

const benchmark: Benchmark = {
  name: 'deploy-dockerfile',
  description:
    'source upload + build + deploy build:<id> → first proxied 200 vs buildah bud + fork+exec → first 200; then a rebuild after one change',
  run: () =>
    withMachineBench(
      'deploy-dockerfile',
      async (b) => {
        const from = await b.pushImage('base:1', BASE);
        // buildah names an `oci:` image after its path and refuses capitals, which the
        // bench's mkdtemp dir may have: the baseline's dir is lowercase hex.
        const work = path.join(os.tmpdir(), `pier-bench-plain-${randomBytes(6).toString('hex')}`);
        try {
          const layout = path.join(work, 'base-layout');
          await writeOciLayout(layout, BASE);
          await b.createApp(APP);
          return await measureBoth(b, from, work, layout);
        } finally {
          await rm(work, { recursive: true, force: true });
        }
      },
      { env: { PIER_BUILD_DISK_GB: '1' } },
    ),
};

async function measureBoth(b: MachinePier, from: string, work: string, layout: string) {
  const pages = ['hello from build 1\n', 'hello from build 2\n'];
  const plain1 = await plainSample(work, layout, pages[0]!, 1);
  console.log(`  baseline first: ${describeSample(plain1)}`);
  const pier1 = await pierSample(b, from, pages[0]!);
  console.log(`  pier first:     ${describeSample(pier1)}`);
  const plain2 = await plainSample(work, layout, pages[1]!, 2);
  console.log(`  baseline after one change: ${describeSample(plain2)}`);
  const pier2 = await pierSample(b, from, pages[1]!);
  console.log(`  pier after one change:     ${describeSample(pier2)}`);

  const ratio = pier1.ms / plain1.ms;
  const rebuild = pier2.parts.build! / pier1.parts.build!;
  const goals =
    `pier ÷ baseline ${ratio.toFixed(2)} (goal ≤ ${GOAL_RATIO}); ` +
    `rebuild ÷ first build ${rebuild.toFixed(2)} (goal ≤ ${GOAL_REBUILD})`;
  console.log(`  ${goals}`);
  const result = compare({
    name: 'deploy-dockerfile',
    baselineLabel: 'buildah bud + fork+exec httpd → 200',
    connections: 1,
    baseline: asLoad([plain1]),
    pier: asLoad([pier1]),
    // Times, not rates: pier ≤ 1.3 × baseline is a rate ratio ≥ 1/1.3.
    goal: { minRatio: 1 / GOAL_RATIO, maxP99Ms: round(plain1.ms * GOAL_RATIO) },
    notes: {
      store: b.store,
      headline: 'req/s are deploys/s (1000 ÷ ms); ratio is baseline ms ÷ pier ms (goal ≥ 1/1.3)',
      pierOverBaseline: round(ratio, 2),
      rebuildOverFirstBuild: round(rebuild, 2),
      rebuildGoalMet: rebuild <= GOAL_REBUILD ? 'yes' : 'no',
      via: 'API steps (upload, build, deploy), not the CLI',
      ...flat('baseline', plain1),
      ...flat('pier', pier1),
      ...flat('baselineRebuild', plain2),
      ...flat('pierRebuild', pier2),
      ...(await machineBusy()),
    },
  });
  return { ...result, goalMet: result.goalMet && rebuild <= GOAL_REBUILD };
}

function flat(prefix: string, s: Sample): Record<string, number> {
  const out: Record<string, number> = { [`${prefix}_ms`]: round(s.ms) };
  for (const [k, v] of Object.entries(s.parts)) out[`${prefix}_${k}Ms`] = round(v);
  return out;
}

export default benchmark;
