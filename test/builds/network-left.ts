/**
 * What of a build's lent network (runtime/local/build-networks.ts) is left on the host:
 * its network namespace, the user namespace kept beside it, the host end of its veth and
 * its address lease in the data dir. Nothing, once the build has ended however it ended.
 */
import { access } from 'node:fs/promises';
import path from 'node:path';
import { vethName } from '../../src/runtime/sandbox/names.js';
import { usernsFile } from '../../src/runtime/sandbox/userns.js';

export async function buildNetworkLeft(dataDir: string, buildId: string): Promise<string[]> {
  const id = buildId.toLowerCase();
  const places = [
    `/run/netns/pier-${id}`,
    usernsFile(`pier-${id}`),
    `/sys/class/net/${vethName(id)}`,
    path.join(dataDir, 'machines', '.builds', `${id}.json`),
  ];
  const left = await Promise.all(
    places.map((p) =>
      access(p).then(
        () => p,
        () => undefined,
      ),
    ),
  );
  return left.filter((p): p is string => !!p);
}
