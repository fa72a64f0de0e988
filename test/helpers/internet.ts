/**
 * A stand-in for the internet, for tests of what machines (and builds) reach beyond the
 * host: a network namespace behind a veth of its own (10.x.y.0/29: the host is .1, the
 * namespace answers on .2–.5), reached only routed and NATed by the host, with an HTTP
 * server on port 8080 that answers who called (the NATed source) and on which of its
 * addresses. It is in a private range, as it must be on a test host: the platform under
 * test allows private targets.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { run } from '../../src/runtime/sandbox/exec.js';
import { freeMachineCidr } from '../machines/bed.js';

export interface Internet {
  ns: string;
  veth: string;
  /** The host's address on it: the source the server sees (NAT). */
  host: string;
  /** Its address `n` (2–5). */
  at: (n: number) => string;
  server: ChildProcess;
}

/** Makes the stand-in in a free range of 10.`octet`–`octet`+9 (freeMachineCidr). */
export async function makeInternet(octet: number): Promise<Internet> {
  const base = (await freeMachineCidr(octet)).split('/')[0]!.split('.').slice(0, 3).join('.');
  const at = (n: number) => `${base}.${n}`;
  const ns = `pwi-${process.pid}`;
  const veth = `pwi${process.pid}`.slice(0, 15);
  await run(['ip', 'netns', 'add', ns]);
  await run(['ip', 'link', 'add', veth, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', ns]);
  await run(['ip', 'addr', 'add', `${at(1)}/29`, 'dev', veth]);
  await run(['ip', 'link', 'set', 'dev', veth, 'up']);
  // An uplink forwards (replies to the machines come in here), as a real one would.
  await run(['sysctl', '-q', '-w', `net.ipv4.conf.${veth}.forwarding=1`]);
  for (const n of [2, 3, 4, 5])
    await run(['ip', '-n', ns, 'addr', 'add', `${at(n)}/29`, 'dev', 'eth0']);
  await run(['ip', '-n', ns, 'link', 'set', 'dev', 'eth0', 'up']);
  await run(['ip', '-n', ns, 'link', 'set', 'dev', 'lo', 'up']);
  const code = `require('http').createServer((q, s) => s.end('seen ' + q.socket.remoteAddress + ' on ' + q.socket.localAddress)).listen(8080, '0.0.0.0', () => console.log('up'))`;
  const server = spawn('ip', ['netns', 'exec', ns, process.execPath, '-e', code], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise<void>((resolve, reject) => {
    server.stdout?.once('data', () => resolve());
    server.once('exit', (c) => reject(new Error(`internet server exited with ${c}`)));
  });
  return { ns, veth, host: at(1), at, server };
}

export async function removeInternet(i: Internet | undefined): Promise<void> {
  if (!i) return;
  i.server.kill('SIGKILL');
  await run(['ip', 'link', 'del', 'dev', i.veth]).catch(() => {});
  await run(['ip', 'netns', 'del', i.ns]).catch(() => {});
}
