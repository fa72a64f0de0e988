/**
 * Start from stopped → first proxied response. pier: a machine is stopped with
 * `POST /v1/machines/:id/stop` (untimed), then `POST /v1/machines/:id/start` (answers once
 * the port accepts connections) and GETs through the proxy until the first 200 are
 * timed. Baseline, in the same run: the same busybox binary with a plain fork+exec, spawn
 * → first 200, as in `machines-create`.
 *
 * A start reuses what the create made (writable layer, netns, cgroup, record) and mounts
 * the overlay again; the process is new. One unmeasured stop/start comes first.
 */
import type { Benchmark } from './lib/benchmark.js';
import { describeSample, fmtMs, mean, round } from './lib/db-samples.js';
import { alternateWithPlain, compareWithPlain } from './lib/machine-alternate.js';
import { timedStart, timedTransition } from './lib/machine-ops.js';
import { MACHINE_SAMPLES as SAMPLES, withMachineBench } from './lib/machine-pier.js';
import { assertSameBinary, plainSample } from './lib/machine-plain.js';

/**
 * No goal was set for a start; this one is a proposal: a start does less than a create
 * (no image, layer or network to make), so it should meet the create's 300 ms.
 */
const GOAL_MS = 300;
const APP = 'start';

const benchmark: Benchmark = {
  name: 'machines-start',
  description: `POST /v1/machines/:id/start of a stopped machine → first 200 through the proxy vs fork+exec of the same busybox httpd → first 200, ${SAMPLES} samples each`,
  run: () =>
    withMachineBench('machines-start', async (b, www) => {
      await b.createApp(APP);
      const id = (await b.createMachine(APP)).id as string;
      const digest = await assertSameBinary(b.machineRoot(id));
      const stop = () => timedTransition(b, id, 'stop', 'stopped');
      const stops: number[] = [await stop()];
      const warm = await timedStart(b, APP, id);
      console.log(`  pier warm-up start: ${describeSample(warm.sample)}`);
      console.log(`  baseline warm-up: ${describeSample(await plainSample(www))}`);

      const rounds = await alternateWithPlain({
        samples: SAMPLES,
        www,
        pier: async () => {
          stops.push(await stop());
          return timedStart(b, APP, id);
        },
        goal: `proposed goal < ${fmtMs(GOAL_MS)}`,
      });
      console.log(`  (POST stop, untimed by the comparison: mean ${fmtMs(mean(stops))})`);

      return compareWithPlain(rounds, {
        name: benchmark.name,
        goalMs: GOAL_MS,
        store: b.store,
        notes: {
          goalNote: 'no goal in the issue; 300 ms (the create goal) is a proposal',
          busyboxSha256: digest,
          stopMeanMs: round(mean(stops)),
        },
      });
    }),
};

export default benchmark;
