/**
 * What of a build's lent network (runtime/local/build-networks.ts) is left on the host:
 * its network namespace, the user namespace kept beside it, the host end of its veth and
 * its address lease in the data dir. Nothing, once the build has ended however it ended.
 */
import path from 'node:path';
import { vethName } from '../../src/runtime/sandbox/names.js';
import { usernsFile } from '../../src/runtime/sandbox/userns.js';
import { existingPaths } from '../helpers/existing-paths.js';

export async function buildNetworkLeft(dataDir: string, buildId: string): Promise<string[]> {
  const id = buildId.toLowerCase();
  return existingPaths([
    `/run/netns/pier-${id}`,
    usernsFile(`pier-${id}`),
    `/sys/class/net/${vethName(id)}`,
    path.join(dataDir, 'machines', '.builds', `${id}.json`),
  ]);
}
