/**
 * Test servers speaking the real protocols on loopback: Debian's `pebble` (an ACME CA)
 * and `pebble-challtestsrv` (a DNS server whose records a test sets over its management
 * API). Pebble validates against pier's own listeners (HTTP-01 on the API's port) and
 * resolves names through the challtestsrv DNS, which answers 127.0.0.1 for any name.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import https from 'node:https';
import { selfSignedCert } from '../helpers/self-signed.js';

export async function freePort(): Promise<number> {
  const server = net.createServer();
  // (UDP users of the port: the DNS servers; a free TCP port is free for UDP here often
  // enough, and a clash fails the start loudly.)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

async function waitForPort(port: number, child: ChildProcess, what: string): Promise<void> {
  for (let i = 0; i < 100; i++) {
    if (child.exitCode !== null) throw new Error(`${what} exited (${child.exitCode})`);
    const ok = await new Promise<boolean>((resolve) => {
      const s = net.connect(port, '127.0.0.1', () => {
        s.destroy();
        resolve(true);
      });
      s.on('error', () => resolve(false));
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${what} did not listen on ${port}`);
}

function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
  });
}

export interface DnsServer {
  /** HOST:PORT of the DNS server (PIER_DNS_RESOLVER). */
  address: string;
  setTxt(host: string, value: string): Promise<void>;
  clearTxt(host: string): Promise<void>;
  addA(host: string, addresses: string[]): Promise<void>;
  setCname(host: string, target: string): Promise<void>;
  clearA(host: string): Promise<void>;
  close(): Promise<void>;
}

export async function startDnsServer(): Promise<DnsServer> {
  const [dnsPort, mgmtPort] = [await freePort(), await freePort()];
  // prettier-ignore
  const child = spawn('pebble-challtestsrv', [
    '-dns01', `127.0.0.1:${dnsPort}`, '-management', `127.0.0.1:${mgmtPort}`,
    '-http01', '', '-https01', '', '-tlsalpn01', '', '-defaultIPv6', '',
  ], { stdio: 'ignore' });
  await waitForPort(mgmtPort, child, 'pebble-challtestsrv');
  const call = async (route: string, body: unknown) => {
    const res = await fetch(`http://127.0.0.1:${mgmtPort}/${route}`, {
      method: 'POST',
      body: JSON.stringify(body),
    });
    if (!res.ok) throw new Error(`challtestsrv ${route}: ${res.status}`);
  };
  const fqdn = (h: string) => (h.endsWith('.') ? h : `${h}.`);
  return {
    address: `127.0.0.1:${dnsPort}`,
    setTxt: (host, value) => call('set-txt', { host: fqdn(host), value }),
    clearTxt: (host) => call('clear-txt', { host: fqdn(host) }),
    setCname: (host, target) => call('set-cname', { host: fqdn(host), target: fqdn(target) }),
    addA: (host, addresses) => call('add-a', { host: fqdn(host), addresses }),
    clearA: (host) => call('clear-a', { host: fqdn(host) }),
    close: () => stop(child),
  };
}

export interface Pebble {
  directoryUrl: string;
  /** Trust for talking to pebble's own API (PIER_ACME_CA_FILE). */
  caFile: string;
  /** The root pebble's certificates chain to (PEM). */
  root(): Promise<string>;
  close(): Promise<void>;
}

/** Pebble validating HTTP-01 on `httpPort` and TLS-ALPN-01 on `tlsPort` of 127.0.0.1. */
export async function startPebble(
  dir: string,
  opts: { dnsServer: string; httpPort: number; tlsPort: number },
): Promise<Pebble> {
  const [port, mgmtPort] = [await freePort(), await freePort()];
  const tls = await selfSignedCert(dir, {
    cn: 'pebble',
    days: 2,
    subjectAltName: 'IP:127.0.0.1,DNS:localhost',
    name: 'pebble',
  });
  const configFile = path.join(dir, 'pebble-config.json');
  await writeFile(
    configFile,
    JSON.stringify({
      pebble: {
        listenAddress: `127.0.0.1:${port}`,
        managementListenAddress: `127.0.0.1:${mgmtPort}`,
        certificate: tls.certFile,
        privateKey: tls.keyFile,
        httpPort: opts.httpPort,
        tlsPort: opts.tlsPort,
        ocspResponderURL: '',
        externalAccountBindingRequired: false,
      },
    }),
  );
  const child = spawn('pebble', ['-config', configFile, '-dnsserver', opts.dnsServer], {
    stdio: 'ignore',
    env: { ...process.env, PEBBLE_VA_NOSLEEP: '1', PEBBLE_WFE_NONCEREJECT: '0' },
  });
  await waitForPort(port, child, 'pebble');
  await waitForPort(mgmtPort, child, 'pebble management');
  const ca = await readFile(tls.certFile, 'utf8');
  return {
    directoryUrl: `https://127.0.0.1:${port}/dir`,
    caFile: tls.certFile,
    root: () =>
      new Promise<string>((resolve, reject) => {
        https
          .get(`https://127.0.0.1:${mgmtPort}/roots/0`, { ca }, (res) => {
            let text = '';
            res.setEncoding('utf8');
            res.on('data', (c: string) => (text += c));
            res.on('end', () => resolve(text));
          })
          .on('error', reject);
      }),
    close: () => stop(child),
  };
}
