/**
 * The walls on the machines' network, tried from inside real machines (busybox from a
 * real registry) with connects and fetches only: another group's machine, a host service
 * on 0.0.0.0, egress rules. The "internet" is a stand-in (test/helpers/internet.ts) which
 * the machines reach only routed and NATed by the host; names resolve through a DNS
 * server on loopback whose answers the test changes.
 */
import net from 'node:net';
import os from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeInternet, removeInternet, type Internet } from '../../../test/helpers/internet.js';
import { freeMachineCidr } from '../../../test/machines/bed.js';
import { run } from '../sandbox/exec.js';
import { gatewayOf, Network, sweepWalls } from '../sandbox/index.js';
import { wallsTable } from '../sandbox/walls-ruleset.js';
import { startTestDns, type TestDns } from './dns.test-helper.js';
import { busyboxLayer, DEFAULT_APPLETS } from '../images/build.test-helper.js';
import {
  finishSession,
  makeRuntimeBed,
  runtimeUnavailable,
  type RuntimeBed,
} from './testbed.test-helper.js';

const unavailable = await runtimeUnavailable();
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

describe.skipIf(unavailable)(
  `local runtime: network walls${unavailable ? ` (skipped: ${unavailable})` : ''}`,
  () => {
    let bed: RuntimeBed;
    let dns: TestDns;
    let internet: Internet;
    let hostService: net.Server;
    let hostPort: number;
    /** A host service named in one machine's `hostPorts`, as a database front would be. */
    let front: net.Server;
    let frontPort: number;
    const ip: Record<string, string> = {};
    const id = (name: string) => `mch-nw-${name}`;

    /** Runs `argv` in machine `name`; its exit code and output. */
    const inside = async (name: string, argv: string[]) => {
      const s = await bed.runtime.shell(id(name), { argv, tty: false, cols: 80, rows: 24 });
      return finishSession(s, '');
    };
    /** An HTTP GET with nc (busybox's static wget crashes without NSS libraries). */
    const fetchFrom = async (name: string, host: string, port: number) => {
      const argv = ['/bin/nc', '-w', '2', host, String(port)];
      const s = await bed.runtime.shell(id(name), { argv, tty: false, cols: 80, rows: 24 });
      const r = await finishSession(s, 'GET /index.html HTTP/1.0\r\n\r\n');
      return { ...r, body: r.stdout.split('\r\n\r\n')[1] ?? '' };
    };

    beforeAll(async () => {
      dns = await startTestDns();
      internet = await makeInternet(240);
      dns.records.set('svc.pier.test', [internet.at(2)]);
      dns.records.set('other.pier.test', [internet.at(5)]);
      bed = await makeRuntimeBed('nw', await freeMachineCidr(230), {
        // The stand-in internet is in a private range, as it must be on a test host.
        walls: { allowPrivate: true, dnsServers: [dns.server], minRefreshMs: 200 },
      });
      const listen = async (text: string) => {
        const server = net.createServer((s) => s.end(text));
        await new Promise<void>((r) => server.listen(0, '0.0.0.0', () => r()));
        return [server, (server.address() as net.AddressInfo).port] as const;
      };
      [hostService, hostPort] = await listen('host-service\n');
      [front, frontPort] = await listen('front\n');
      const image = await bed.push('walls', {
        layers: [
          busyboxLayer([...DEFAULT_APPLETS, 'nc', 'nslookup']),
          [{ path: 'www/index.html', content: 'walls-page\n' }],
        ],
        config: { Cmd: ['/bin/httpd', '-f', '-p', '3000', '-h', '/www'] },
      });
      const machines: [string, string, object][] = [
        ['a1', 'org-a', {}],
        ['a2', 'org-a', {}],
        ['b1', 'org-b', { hostPorts: [frontPort] }],
        ['deny', 'org-b', { egress: { mode: 'deny-all', domains: [], cidrs: [] } }],
        [
          'allow',
          'org-c',
          {
            egress: {
              mode: 'allowlist',
              domains: ['svc.pier.test'],
              cidrs: [`${internet.at(4)}/32`],
            },
          },
        ],
      ];
      for (const [name, group, extra] of machines) {
        const spec = bed.spec(name, image, {
          readiness: 'port',
          network: { group, ...extra },
        });
        ip[name] = (await bed.runtime.create(spec)).privateIp;
      }
    }, 120_000);

    afterAll(async () => {
      await bed?.cleanup();
      await removeInternet(internet);
      await dns?.close();
      hostService?.close();
      front?.close();
    });

    it('lets machines of one group reach each other, and no other group’s machine', async () => {
      const [same, other, closedSame, closedOther] = await Promise.all([
        fetchFrom('a2', ip.a1!, 3000),
        fetchFrom('b1', ip.a1!, 3000),
        inside('a2', ['/bin/nc', '-w', '2', ip.a1!, '3999']),
        inside('b1', ['/bin/nc', '-w', '2', ip.a1!, '3999']),
      ]);
      expect(same.body).toBe('walls-page\n');
      expect(other.stdout).toBe('');
      // A closed port answers its own group at once (a reset); for another group the
      // packets vanish on the way, whatever the port.
      expect(closedSame.stderr).toMatch(/refused/);
      expect(closedOther.stderr).toMatch(/timed out/);
      // The host still reaches every machine (the proxy's path).
      expect(await (await fetch(`http://${ip.b1}:3000/index.html`)).text()).toBe('walls-page\n');
    });

    it('closes every host service to machines: the gateway and the host’s other addresses', async () => {
      const gateway = gatewayOf(bed.options.network.cidr);
      const others = Object.values(os.networkInterfaces())
        .flat()
        .filter((a) => a && a.family === 'IPv4' && !a.internal && a.address !== gateway)
        .map((a) => a!.address)
        .slice(0, 2);
      // The service answers the host itself.
      const local = await new Promise<string>((resolve, reject) => {
        const c = net.connect(hostPort, gateway);
        let got = '';
        c.on('data', (d) => (got += d.toString())).on('end', () => resolve(got));
        c.on('error', reject);
      });
      expect(local).toBe('host-service\n');
      const probes = await Promise.all(
        [gateway, ...others].map((host) =>
          inside('a1', ['/bin/nc', '-w', '2', host, String(hostPort)]),
        ),
      );
      for (const p of probes) expect(p.stdout).not.toContain('host-service');
    });

    it('opens a host port to the machines that name it in hostPorts, and to no other', async () => {
      const gateway = gatewayOf(bed.options.network.cidr);
      const connect = (name: string) =>
        inside(name, ['/bin/nc', '-w', '2', gateway, String(frontPort)]);
      const [named, other] = await Promise.all([connect('b1'), connect('a1')]);
      expect(named.stdout).toBe('front\n');
      expect(other.stdout).toBe('');
    });

    it('NATs an open machine to the internet, blocks deny-all, and lets an allowlist through only to its CIDRs and names', async () => {
      const url = (n: number) => [internet.at(n), 8080] as const;
      const [open, denied, byName, byCidr, other] = await Promise.all([
        fetchFrom('a1', ...url(2)),
        fetchFrom('deny', ...url(2)),
        fetchFrom('allow', ...url(2)),
        fetchFrom('allow', ...url(4)),
        fetchFrom('allow', ...url(5)),
      ]);
      // The internet sees the host's address, not the machine's.
      expect(open.body).toBe(`seen ${internet.host} on ${internet.at(2)}`);
      expect(denied.stdout).toBe('');
      expect(byName.body).toBe(`seen ${internet.host} on ${internet.at(2)}`);
      expect(byCidr.body).toBe(`seen ${internet.host} on ${internet.at(4)}`);
      expect(other.stdout).toBe('');
    });

    it('resolves names inside machines by their egress: all, only allowed ones, none', async () => {
      const lookup = (name: string, host: string) => inside(name, ['/bin/nslookup', host]);
      const [open, allowed, notAllowed, denied, config] = await Promise.all([
        lookup('a1', 'other.pier.test'),
        lookup('allow', 'svc.pier.test'),
        lookup('allow', 'other.pier.test'),
        lookup('deny', 'svc.pier.test'),
        inside('a1', ['/bin/cat', '/etc/resolv.conf']),
      ]);
      const gateway = gatewayOf(bed.options.network.cidr);
      expect(config.stdout).toBe(`nameserver ${gateway}\n`);
      // An open machine gets the host's resolvers' answer, passed through.
      expect(open.stdout).toContain(`Address: ${internet.at(5)}`);
      // An allowlisted name answers with the address its walls let through.
      expect(allowed.stdout).toContain(`Address: ${internet.at(2)}`);
      expect(notAllowed.stdout + notAllowed.stderr).toMatch(/REFUSED/);
      expect(notAllowed.stdout).not.toContain(internet.at(5));
      expect(denied.stdout + denied.stderr).toMatch(/REFUSED/);
      expect(denied.stdout).not.toContain(internet.at(2));
    });

    it('follows an allowed name to its new address', async () => {
      dns.records.set('svc.pier.test', [internet.at(3)]);
      let moved = await fetchFrom('allow', internet.at(3), 8080);
      for (let i = 0; i < 10 && moved.body === ''; i++) {
        await sleep(500);
        moved = await fetchFrom('allow', internet.at(3), 8080);
      }
      expect(moved.body).toBe(`seen ${internet.host} on ${internet.at(3)}`);
      expect((await fetchFrom('allow', internet.at(2), 8080)).stdout).toBe('');
    });

    it('removes its walls with the bridge, and sweeps the walls of a bridge that is gone', async () => {
      const gone = `pwgone${process.pid}`.slice(0, 15);
      await run(['nft', '-f', '-'], 10_000, `table inet ${wallsTable(gone)} {}\n`);
      expect(await sweepWalls()).toContain(gone);
      await new Network(bed.options.network).removeBridge();
      const tables = await run(['nft', 'list', 'tables']);
      expect(tables).not.toContain(wallsTable(bed.options.network.bridge));
      expect(tables).not.toContain(wallsTable(gone));
    });
  },
);
