/**
 * Many machines at once: `BENCH_MACHINES_MANY` (default 100) creates sent concurrently
 * (`POST /v1/apps/:app/machines`, wait=true, memoryMb 128), timed until every one has
 * answered 201; then, with all of them running and idle, the memory of the platform
 * itself: the RSS of the `pier serve` process (a process of its own, lib/machine-pier.ts),
 * and separately the per-machine processes pier starts — one Node keeper per machine
 * (found by the sandboxes' records), runc and the init — with the machines'
 * own busybox httpd for scale. RSS counts shared pages in every process; PSS splits them,
 * so the keepers' PSS sum is what they take together.
 *
 * Baselines, in the same run: the same number of plain fork+exec of the same busybox
 * httpd at once, until every one answered its first 200 (time); and pier's RSS with no
 * machine, both right after its start and after one machine was created and destroyed
 * (the runtime's code loaded, the image pulled).
 *
 * The runner's ratio is baseline time ÷ pier time. The goal (the platform's own memory
 * under 150 MB with 100 idle machines) is judged on pier's RSS: `goalMet` says so, not the
 * ratio or p99 of the summary line. Every machine is destroyed at the end (timed, in
 * `notes`), the bridge removed, also after a failure.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { compare, type Benchmark } from './lib/benchmark.js';
import { asLoad, describeSample, fmtMs, percentile, round, Stopwatch } from './lib/db-samples.js';
import { createMany } from './lib/machine-ops.js';
import { answersOnItsAddress, inBatches, withMachineBench } from './lib/machine-pier.js';
import { plainMany } from './lib/machine-plain.js';
import type { Memory } from './lib/machine-proc.js';
import { cpuSince, machinesUsage, markCpu, pierCpuOver, pierMemory } from './lib/machine-usage.js';
import { machineBusy } from './lib/s3-load.js';

const COUNT = Number(process.env.BENCH_MACHINES_MANY ?? 100);
/** How long the machines sit idle before the memory is read (and pier's CPU measured). */
const IDLE_S = Number(process.env.BENCH_MACHINES_IDLE_S ?? 10);
/** The goal: the platform's own memory under 150 MB (10^6 bytes) with 100 idle machines. */
const GOAL_MB = 150;
const GOAL_MIB = (GOAL_MB * 1e6) / 2 ** 20;
const APP = 'many';

const mib = (n: number) => `${n.toFixed(1)} MiB`;
const describeMem = (m: Memory) =>
  `RSS ${mib(m.rssMiB)} (anonymous ${mib(m.anonMiB)}, file ${mib(m.fileMiB)}; ` +
  `PSS ${mib(m.pssMiB)}, peak RSS ${mib(m.hwmMiB)})`;

const benchmark: Benchmark = {
  name: 'machines-many',
  description: `${COUNT} machines created at once: time vs ${COUNT} fork+exec of the same busybox httpd; pier's own memory with them idle`,
  run: () =>
    withMachineBench('machines-many', async (b, www) => {
      await sleep(3000);
      const atStart = await pierMemory(b);
      console.log(`  pier at start, no machine: ${describeMem(atStart)}`);

      await b.createApp(APP);
      const warm = await b.createMachine(APP);
      await b.api('POST', `/v1/machines/${warm.id}/destroy`);
      await sleep(3000);
      const noMachines = await pierMemory(b);
      console.log(`  pier after one create + destroy, no machine: ${describeMem(noMachines)}`);

      const plain = await plainMany(www, COUNT);
      console.log(`  baseline: ${describeSample(plain)}`);
      await sleep(1000);

      const cpu0 = await markCpu(b);
      const watch = new Stopwatch();
      const created = await createMany(b, APP, COUNT);
      watch.step(`${COUNT} × POST → 201`);
      const pier = watch.done();
      const cpu = await cpuSince(cpu0);
      const ok = created.filter((c) => c.id !== undefined);
      const failed = created.filter((c) => c.error !== undefined);
      const each = ok.map((c) => c.ms).sort((x, y) => x - y);
      console.log(
        `  pier: ${describeSample(pier)}; ${ok.length} created, ${failed.length} failed; ` +
          (each.length
            ? `each create p50 ${fmtMs(percentile(each, 50))}, slowest ${fmtMs(each.at(-1)!)}; `
            : '') +
          `pier CPU ${cpu.pier.toFixed(1)} s`,
      );
      const meanOf = (k: string) =>
        ok.length ? ok.reduce((a, c) => a + (c.where?.[k] ?? 0), 0) / ok.length : 0;
      console.log(
        `    each create, mean: request→row ${fmtMs(meanOf('toRow'))}, row→ready ` +
          `${fmtMs(meanOf('rowToReady'))} (boot ${fmtMs(meanOf('boot'))}), ready→201 ` +
          `${fmtMs(meanOf('readyTo201'))}`,
      );
      const errors = [...new Set(failed.map((f) => f.error))];
      for (const e of errors.slice(0, 5)) console.log(`    error: ${e}`);
      const afterCreate = await pierMemory(b);

      // Every machine answers on its own address (straight over the bridge).
      let answering = 0;
      await inBatches(ok, 20, async (c) => {
        if (await answersOnItsAddress(c.ip!)) answering++;
      });
      console.log(`  ${answering} of ${ok.length} answer on their address`);

      const cpuIdle = await pierCpuOver(b, IDLE_S);
      const idle = await pierMemory(b);
      const { keepers, runtimes, mains, processes, keepersCpu } = await machinesUsage(
        b,
        ok.map((c) => c.id!),
      );
      const wallS = pier.ms / 1000;
      console.log(
        `  CPU during the ${COUNT} creates (${wallS.toFixed(1)} s wall, ${(2 * wallS).toFixed(0)} CPU-s on 2 cores): ` +
          `host busy ${cpu.host.toFixed(1)} s; pier ${cpu.pier.toFixed(1)} s, the tools it ran ` +
          `(ip, btrfs, mount, nsenter...) ${cpu.tools.toFixed(1)} s, its PostgreSQL backends ` +
          `${cpu.pg.toFixed(1)} s, the keepers (their life so far) ${keepersCpu.toFixed(1)} s`,
      );
      console.log(
        `  pier with ${ok.length} idle machines: ${describeMem(idle)} (goal < ${GOAL_MB} MB = ${mib(GOAL_MIB)})`,
      );
      console.log(
        `    its CPU while idle: ${(cpuIdle * 100).toFixed(1)} % of a core over ${IDLE_S} s`,
      );
      console.log(
        `  keepers (${keepers.count}): RSS ${mib(keepers.rssMiB)} in all, ${mib(keepers.meanRssMiB)} each; ` +
          `PSS ${mib(keepers.pssMiB)} in all`,
      );
      console.log(
        `  runc + init (${runtimes.count}): RSS ${mib(runtimes.rssMiB)}, PSS ${mib(runtimes.pssMiB)}; ` +
          `the machines' httpd (${mains.count}): RSS ${mib(mains.rssMiB)}, PSS ${mib(mains.pssMiB)}`,
      );
      console.log(`  processes on the host: ${processes}`);

      const destroyWatch = new Stopwatch();
      await inBatches(ok, COUNT, (c) => b.api('POST', `/v1/machines/${c.id}/destroy`));
      destroyWatch.step('destroy all');
      const destroyMs = destroyWatch.done().ms;
      console.log(`  destroyed ${ok.length} at once in ${fmtMs(destroyMs)}`);
      await sleep(2000);
      const afterDestroy = await pierMemory(b);
      console.log(`  pier after destroying them: ${describeMem(afterDestroy)}`);

      if (ok.length === 0) throw new Error(`no machine could be created: ${errors.join('; ')}`);
      const result = compare({
        name: benchmark.name,
        baselineLabel: `${COUNT} × fork+exec httpd → 200`,
        connections: COUNT,
        baseline: asLoad([plain]),
        pier: asLoad([pier]),
        goal: { minRatio: 0, maxP99Ms: Infinity },
        notes: {
          store: b.store,
          ...(b.nodeFlags ? { pierNodeFlags: b.nodeFlags } : {}),
          headline: `req/s = 1000 ÷ ms for all ${COUNT}; goalMet = pier RSS < ${GOAL_MB} MB with the machines idle`,
          requested: COUNT,
          created: ok.length,
          failed: failed.length,
          ...(errors.length ? { firstError: errors[0]! } : {}),
          answering,
          baselineAllMs: round(plain.ms),
          pierAllMs: round(pier.ms),
          pierEachP50Ms: each.length ? round(percentile(each, 50)) : 0,
          pierEachMaxMs: each.length ? round(each.at(-1)!) : 0,
          pierCpuDuringCreateS: round(cpu.pier),
          toolsCpuDuringCreateS: round(cpu.tools),
          pgCpuDuringCreateS: round(cpu.pg),
          hostBusyCpuDuringCreateS: round(cpu.host),
          keepersCpuS: round(keepersCpu),
          pierEachToRowMs: round(meanOf('toRow')),
          pierEachRowToReadyMs: round(meanOf('rowToReady')),
          pierEachBootMs: round(meanOf('boot')),
          pierEachReadyTo201Ms: round(meanOf('readyTo201')),
          pierIdleCpuPct: round(cpuIdle * 100),
          pierRssAtStartMiB: round(atStart.rssMiB),
          pierRssNoMachinesMiB: round(noMachines.rssMiB),
          pierRssAfterCreateMiB: round(afterCreate.rssMiB),
          pierRssIdleMiB: round(idle.rssMiB),
          pierPssIdleMiB: round(idle.pssMiB),
          pierAnonIdleMiB: round(idle.anonMiB),
          pierFileIdleMiB: round(idle.fileMiB),
          pierAnonAtStartMiB: round(atStart.anonMiB),
          pierPeakRssMiB: round(idle.hwmMiB),
          pierRssAfterDestroyMiB: round(afterDestroy.rssMiB),
          keepers: keepers.count,
          keepersRssMiB: round(keepers.rssMiB),
          keeperMeanRssMiB: round(keepers.meanRssMiB),
          keepersPssMiB: round(keepers.pssMiB),
          runtimeRssMiB: round(runtimes.rssMiB),
          runtimePssMiB: round(runtimes.pssMiB),
          machinesHttpdRssMiB: round(mains.rssMiB),
          hostProcesses: processes,
          destroyAllMs: round(destroyMs),
          ...(await machineBusy()),
        },
      });
      return { ...result, goalMet: ok.length === COUNT && idle.rssMiB < GOAL_MIB };
    }),
};

export default benchmark;
