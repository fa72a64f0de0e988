/**
 * Create → first proxied response. pier: `POST /v1/apps/:app/machines` (waits for
 * `running`: the port accepts connections), then GETs through pier's proxy (Host
 * `<app>.127.0.0.1`, a new connection each) until the first 200. Baseline, in the same
 * run: the same busybox binary started with a plain fork+exec on a free port, polled the
 * same way until its first 200.
 *
 * The image is cached: one unmeasured create first pulls it (and opens the storage pool
 * and makes the bridge); that time is reported on its own. Then the samples alternate
 * baseline, pier, baseline, pier..., each machine in an app of its own and destroyed
 * after its sample (untimed).
 */
import type { Benchmark } from './lib/benchmark.js';
import { describeSample, fmtMs, round } from './lib/db-samples.js';
import { alternateWithPlain, compareWithPlain } from './lib/machine-alternate.js';
import { timedCreate } from './lib/machine-ops.js';
import {
  MACHINE_SAMPLES as SAMPLES,
  withMachineBench,
  type MachinePier,
} from './lib/machine-pier.js';
import { assertSameBinary, plainSample } from './lib/machine-plain.js';

/** The goal: create to first response under 300 ms, image cached. */
const GOAL_MS = 300;

/** A new app, then a machine in it → first proxied 200. */
async function pierSample(b: MachinePier, app: string) {
  await b.createApp(app);
  return timedCreate(b, app);
}

const destroy = (b: MachinePier, id: string) => b.api('POST', `/v1/machines/${id}/destroy`);

const benchmark: Benchmark = {
  name: 'machines-create',
  description: `POST /v1/apps/:app/machines → first 200 through the proxy vs fork+exec of the same busybox httpd → first 200, ${SAMPLES} samples each`,
  run: () =>
    withMachineBench('machines-create', async (b, www) => {
      const first = await pierSample(b, 'warm');
      console.log(
        `  pier first create (image pull, pool open, bridge): ${describeSample(first.sample)}`,
      );
      const digest = await assertSameBinary(b.machineRoot(first.machine.id));
      await destroy(b, first.machine.id);
      console.log(`  baseline warm-up: ${describeSample(await plainSample(www))}`);

      const rounds = await alternateWithPlain({
        samples: SAMPLES,
        www,
        pier: (i) => pierSample(b, `create-${i}`),
        after: (s) => destroy(b, s.machine.id),
        goal: `goal < ${fmtMs(GOAL_MS)}`,
      });

      return compareWithPlain(rounds, {
        name: benchmark.name,
        goalMs: GOAL_MS,
        store: b.store,
        notes: { busyboxSha256: digest, pierFirstCreateMs: round(first.sample.ms) },
      });
    }),
};

export default benchmark;
