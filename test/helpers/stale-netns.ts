/**
 * Machine namespaces (`pier-mch-…`: /run/netns, and the user namespace kept beside it)
 * and builds' (`pier-bld-…`, lent by the runtime: build-networks.ts) that a killed test
 * run left: the
 * run's data dir went (or was never swept) with the machine still made, so nothing will
 * ever destroy it. Each run removes them at its start. A namespace is left alone while a
 * process is inside it, or while a data dir under the temp dir still holds the machine's
 * record (`<data dir>/machines/<id>.json`, a build's lease `machines/.builds/<id>.json`):
 * a stopped machine of a live test bed keeps its namespace. (A test host is assumed to run no pier of its own with machines elsewhere.)
 */
import { execFile } from 'node:child_process';
import { access, readdir } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { vethName } from '../../src/runtime/sandbox/names.js';
import { releaseMachineNamespaces, usernsFile } from '../../src/runtime/sandbox/userns.js';

const run = promisify(execFile);
const MACHINE_NETNS = /^pier-((?:mch|bld)-[a-z0-9]+)$/;

async function recorded(id: string, tmp: string): Promise<boolean> {
  for (const name of await readdir(tmp).catch(() => [] as string[])) {
    if (!name.startsWith('pier-')) continue;
    const record = id.startsWith('bld-') ? path.join('.builds', `${id}.json`) : `${id}.json`;
    const ok = await access(path.join(tmp, name, 'machines', record)).then(
      () => true,
      () => false,
    );
    if (ok) return true;
  }
  return false;
}

export async function sweepStaleNetns(tmp = os.tmpdir()): Promise<string[]> {
  const removed: string[] = [];
  // A machine's namespaces are kept as files: its netns, and its user namespace beside it.
  const files = [
    ...(await readdir('/run/netns').catch(() => [] as string[])),
    ...(await readdir(path.dirname(usernsFile('x'))).catch(() => [] as string[])),
  ];
  for (const ns of new Set(files)) {
    const id = MACHINE_NETNS.exec(ns)?.[1];
    if (!id) continue;
    // No netns file any more (only the user namespace left): nothing can be inside.
    const pids = await run('ip', ['netns', 'pids', ns]).catch((err: { stderr?: string }) => ({
      stdout: /No such file/.test(err.stderr ?? '') ? '' : 'unknown',
    }));
    if (pids.stdout.trim() !== '' || (await recorded(id, tmp))) continue;
    await run('ip', ['link', 'del', 'dev', vethName(id)]).catch(() => undefined);
    await releaseMachineNamespaces(ns);
    removed.push(ns);
  }
  return removed;
}
