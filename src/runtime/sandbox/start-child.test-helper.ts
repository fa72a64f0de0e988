/**
 * Started by lifecycle.test.ts as a separate Node process: starts one sandbox, prints
 * its pid and exits, the way a pier that starts a machine and then stops would.
 * Argument: JSON `{ cgroupRoot, runDir, spec }`.
 */
import { CgroupSet } from '../../host/cgroups/cgroup.js';
import { Sandboxes } from './run.js';
import type { SandboxSpec } from './spec.js';

const { cgroupRoot, runDir, spec } = JSON.parse(process.argv[2] ?? '{}') as {
  cgroupRoot: string;
  runDir: string;
  spec: SandboxSpec;
};
const cgroups = await CgroupSet.detect({ root: cgroupRoot }, (reason) => {
  throw new Error(reason);
});
if (!cgroups) throw new Error('no cgroups');
const { pid } = await new Sandboxes({ cgroups, runDir }).run(spec);
process.stdout.write(`${JSON.stringify({ pid, parent: process.pid })}\n`);
