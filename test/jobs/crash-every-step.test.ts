/**
 * Kill -9 at every step of every durable operation: `pier serve` SIGKILLs itself at each
 * crash point an operation passes (test/helpers/crash-harness.ts), is started again, and
 * the operation must finish or end with a reason, leaving nothing behind. A real `pier
 * serve` process, real databases, one data dir and one state store for every round.
 */
import { execFile } from 'node:child_process';
import { access, readdir } from 'node:fs/promises';
import { promisify } from 'node:util';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDnsServer, type DnsServer } from '../edge/acme-servers.js';
import { startReceiver, type Receiver } from '../webhooks/receiver.js';
import { busyboxLayer, pushImage } from '../../src/runtime/images/build.test-helper.js';
import { startRegistry, type TestRegistry } from '../helpers/registry.js';
import { canRunMachines, freeMachineCidr, removeMachinesNetwork } from '../machines/bed.js';
import {
  crashAtEveryPoint,
  startCrashBed,
  waitUntil,
  type CrashBed,
  type CrashOperation,
  type RoundReport,
} from '../helpers/crash-harness.js';
import { request } from '../helpers/platform.js';
import { sourceArchive, uploadSource } from '../builds/archive.js';
import { buildNetworkLeft } from '../builds/network-left.js';

let bed: CrashBed;
let receiver: Receiver;
let dns: DnsServer;
let registry: TestRegistry;
let web: string;
/** The machines network of this file: its own bridge, a range in 10.230–239.0.0/16. */
const bridge = `ck${process.pid % 100000}`;
let cidr = '';
const reports: RoundReport[] = [];

beforeAll(async () => {
  receiver = await startReceiver();
  dns = await startDnsServer();
  registry = await startRegistry();
  await pushImage(registry.url, 'web:1', {
    layers: [busyboxLayer(), [{ path: 'www/' }, { path: 'www/index.html', content: 'hi\n' }]],
    config: { Cmd: ['/bin/httpd', '-f', '-p', '3000', '-h', '/www'] },
  });
  web = `${registry.host}/web:1`;
  if (canRunMachines) cidr = await freeMachineCidr(230);
  bed = await startCrashBed({
    tables: [
      'databases',
      'database_instances',
      'database_archives',
      'buckets',
      'objects',
      'edge_domains',
      'webhooks',
      'machines',
      'deploys',
      'releases',
      'builds',
      'build_sources',
      'apps',
      'names',
    ],
    env: {
      // The receiver of webhooks is on loopback.
      PIER_ALLOW_PRIVATE_TARGETS: '1',
      // A killed dispatcher's claim lapses after twice this plus 10 s.
      PIER_WEBHOOK_TIMEOUT_MS: '1000',
      PIER_EDGE_ADDRESS: 'edge.pier.test',
      PIER_DNS_RESOLVER: dns.address,
      // A booking every window: the periodic job the billing rounds are killed in.
      PIER_BILLING_WINDOW_SECONDS: '2',
      ...(cidr
        ? {
            PIER_MACHINES_BRIDGE: bridge,
            PIER_MACHINES_CIDR: cidr,
            // The registry is on loopback: trusted by name, as an operator would.
            PIER_TRUSTED_REGISTRIES: registry.host,
          }
        : {}),
    },
  });
}, 120_000);

afterAll(async () => {
  for (const r of reports) console.log(`${r.ms} ms: ${r.points.join(', ')}`);
  if (!bed) return;
  for (const a of (await bed.api('GET', '/v1/apps').catch(() => undefined))?.body ?? []) {
    for (const m of (await bed.api('GET', `/v1/apps/${a.name}/machines`)).body ?? []) {
      await bed.api('POST', `/v1/machines/${m.id}/destroy`);
    }
  }
  for (const d of (await bed.api('GET', '/v1/resources').catch(() => undefined))?.body ?? []) {
    await bed.api('DELETE', `/v1/resources/${d.name}`);
  }
  await bed.close();
  await receiver?.close();
  await dns?.close();
  await registry?.stop();
  await removeMachinesNetwork(bridge, cidr);
}, 120_000);

/** Waits until a database is no longer `restoring`: ready, or failed with its reason. */
async function databaseSettles(name: string): Promise<{ state: string; stateReason?: string }> {
  const end = await waitUntil(
    async () => {
      const r = await bed.api('GET', `/v1/resources/${name}`);
      expect(r.status, `${name}: ${JSON.stringify(r.body)}`).toBe(200);
      return r.body.state !== 'restoring' ? r.body : undefined;
    },
    `${name} to settle`,
    90_000,
  );
  if (end.state === 'failed') expect(end.stateReason, `${name} failed`).toBeTruthy();
  else expect(end.state).toBe('ready');
  return end;
}

async function createDatabase(name: string): Promise<void> {
  const made = await bed.api('POST', '/v1/resources', { name, kind: 'postgres' });
  expect(made.status, JSON.stringify(made.body)).toBe(201);
}

async function deleteDatabase(name: string): Promise<void> {
  const gone = await bed.api('DELETE', `/v1/resources/${name}`);
  expect([204, 404], JSON.stringify(gone.body)).toContain(gone.status);
}

let rounds = 0;
/** A copy of `source` (branch or fork) under a name of its own each round. */
function copyOperation(kind: 'branch' | 'fork', source: string): CrashOperation<string> {
  return {
    name: `database ${kind}`,
    kinds: ['databases.copy'],
    async start() {
      const name = `${kind}-${++rounds}`;
      const made = await bed.api('POST', `/v1/resources/${source}/${kind}`, { name });
      expect(made.status, JSON.stringify(made.body)).toBe(202);
      return name;
    },
    settle: async (_bed, name) => void (await databaseSettles(name)),
    remove: (_bed, name) => deleteDatabase(name),
  };
}

/**
 * A restore in place of a database of the round's own (a restore keeps the old timeline's
 * archive, so the bed's state comes back only once the database itself is removed).
 */
const restoreOperation: CrashOperation<{ name: string; preserved: string }> = {
  name: 'database restore',
  kinds: ['databases.restore'],
  async start() {
    const name = `restored-${++rounds}`;
    await createDatabase(name);
    // The archive's first base backup, which the restore reads.
    await waitUntil(
      async () => {
        const r = await bed.store.query(
          `SELECT count(*)::int AS n FROM jobs WHERE kind = 'databases.base-backup'
            AND state = 'done' AND payload->>'databaseId' =
              (SELECT id FROM databases WHERE name = $1)`,
          [name],
        );
        return r.rows[0].n > 0;
      },
      'the first base backup',
      60_000,
    );
    const asOf = new Date().toISOString();
    const r = await bed.api('POST', `/v1/resources/${name}/restore`, { asOf });
    expect(r.status, JSON.stringify(r.body)).toBe(202);
    return { name, preserved: r.body.preservedUnderName as string };
  },
  async settle(_bed, { name, preserved }) {
    await databaseSettles(name);
    await databaseSettles(preserved);
  },
  async remove(_bed, { name, preserved }) {
    await deleteDatabase(preserved);
    await deleteDatabase(name);
  },
};

/**
 * A bucket with an object, deleted with `force`: the purge of its bytes is the job. Its
 * bytes must be gone (a directory named by the bucket's id under the data dir).
 */
const bucketDeleteOperation: CrashOperation<{ name: string; id: string }> = {
  name: 'bucket delete',
  kinds: ['buckets.purge', 'objects.delete-blob'],
  async start() {
    const name = `crash-bucket-${++rounds}`;
    const made = await bed.api('POST', '/v1/buckets', { name });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    const put = await bed.api('POST', `/v1/buckets/${name}/presign`, { op: 'put', key: 'k' });
    expect(put.status, JSON.stringify(put.body)).toBe(200);
    const stored = await fetch(put.body.url, {
      method: 'PUT',
      headers: put.body.requiredHeaders,
      body: 'bytes of the bucket',
    });
    expect(stored.status).toBe(200);
    const gone = await bed.api('DELETE', `/v1/buckets/${name}?force=true`);
    expect(gone.status, JSON.stringify(gone.body)).toBe(200);
    return { name, id: made.body.id };
  },
  async settle(_bed, { name, id }) {
    expect((await bed.api('GET', `/v1/buckets/${name}`)).status).toBe(404);
    await waitUntil(
      async () => !(await pathsNamed(bed.dataDir, id, 4)).length,
      `the bytes of ${name} to be removed`,
      60_000,
    );
  },
  remove: async () => {},
};

/** Paths under `dir` (to `depth` levels) whose name contains `needle`. */
async function pathsNamed(dir: string, needle: string, depth: number): Promise<string[]> {
  if (depth === 0) return [];
  const out: string[] = [];
  for (const e of await readdir(dir, { withFileTypes: true }).catch(() => [])) {
    const p = path.join(dir, e.name);
    if (e.name.includes(needle)) out.push(p);
    else if (e.isDirectory() && !e.isSymbolicLink() && e.name !== 'pool')
      out.push(...(await pathsNamed(p, needle, depth - 1)));
  }
  return out;
}

/**
 * A webhook delivery (its own organization each round, so events reach only its own
 * webhook): it must succeed, having reached the receiver.
 */
const webhookDeliveryOperation: CrashOperation<{ id: string; token: string; path: string }> = {
  name: 'webhook delivery',
  kinds: ['webhooks.delivery'],
  async start() {
    const n = ++rounds;
    const org = await bed.admin('POST', '/admin/v1/orgs', { name: `hooks ${n}` });
    expect(org.status, JSON.stringify(org.body)).toBe(201);
    const token = org.body.token as string;
    const hookPath = `/crash-${n}`;
    const made = await request(bed.base, 'POST', '/v1/webhooks', {
      token,
      body: { url: `${receiver.url}${hookPath}`, events: ['email.sent'] },
    });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    const sent = await bed.admin('POST', `/admin/v1/orgs/${org.body.org.id}/mail-events`, {
      kind: 'email.sent',
      data: { n },
    });
    expect(sent.status, JSON.stringify(sent.body)).toBe(202);
    return { id: made.body.id, token, path: hookPath };
  },
  async settle(_bed, { id, token, path: hookPath }) {
    const list = await waitUntil(
      async () => {
        const r = await request(bed.base, 'GET', `/v1/webhooks/${id}/deliveries`, { token });
        return r.body?.[0]?.status !== 'pending' ? r.body : undefined;
      },
      `the delivery to ${hookPath}`,
      60_000,
    );
    expect(list).toHaveLength(1);
    expect(list[0].status).toBe('succeeded');
    expect(receiver.to(hookPath).length).toBeGreaterThan(0);
  },
  async remove(_bed, { id, token }) {
    const gone = await request(bed.base, 'DELETE', `/v1/webhooks/${id}`, { token });
    expect(gone.status).toBe(204);
  },
};

/**
 * A custom domain's check, whose DNS records are not there: it must end `pending_dns`
 * with the reason, checked.
 */
const domainCheckOperation: CrashOperation<{ app: string; domain: string }> = {
  name: 'domain check',
  kinds: ['edge.domain-check'],
  async start() {
    const app = `crash-app-${++rounds}`;
    expect((await bed.api('POST', '/v1/apps', { name: app })).status).toBe(201);
    const domain = `${app}.example.test`;
    const made = await bed.api('POST', `/v1/apps/${app}/domains`, { domain });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    return { app, domain };
  },
  async settle(_bed, { app, domain }) {
    const d = await waitUntil(
      async () => {
        const r = await bed.api('GET', `/v1/apps/${app}/domains`);
        const mine = (r.body as { domain: string; lastCheckedAt?: string }[]).find(
          (x) => x.domain === domain,
        );
        return mine?.lastCheckedAt ? mine : undefined;
      },
      `the check of ${domain}`,
      60_000,
    );
    expect(d).toMatchObject({ status: 'pending_dns', error: expect.any(String) });
  },
  async remove(_bed, { app }) {
    expect((await bed.api('DELETE', `/v1/apps/${app}`)).status).toBe(204);
  },
};

/**
 * A booking of the closed billing windows (periodic: one job at a time, every 2 s here):
 * the cursor must reach past the window that closed after the round began.
 */
const billingBookingOperation: CrashOperation<number> = {
  name: 'billing booking',
  kinds: ['billing.book'],
  onePerRound: true,
  start: async () => Date.now(),
  async settle(_bed, startedAt) {
    await waitUntil(
      async () => {
        const r = await bed.store.query('SELECT booked_until FROM billing_cursor');
        return r.rows[0] && new Date(r.rows[0].booked_until).getTime() > startedAt;
      },
      'the booking cursor to pass the round',
      60_000,
    );
  },
  remove: async () => {},
};

/**
 * A machine create (its own app each round). The request waits for the machine, so a
 * kill cuts it: the machine is found by its app. It must run, or fail with its cause.
 */
const machineCreateOperation: CrashOperation<{ app: string }> = {
  name: 'machine create',
  kinds: ['machines.create'],
  async start() {
    const app = `crash-vm-${++rounds}`;
    expect((await bed.api('POST', '/v1/apps', { name: app })).status).toBe(201);
    // Not awaited: its answer comes once the machine runs, or never when pier dies.
    void bed.api('POST', `/v1/apps/${app}/machines`, { image: web }).catch(() => undefined);
    await waitUntil(
      async () => (await bed.api('GET', `/v1/apps/${app}/machines`)).body?.length === 1,
      `the machine of ${app} to be recorded`,
      30_000,
    );
    return { app };
  },
  async settle(_bed, { app }) {
    const m = await waitUntil(
      async () => {
        const [one] = (await bed.api('GET', `/v1/apps/${app}/machines`)).body;
        return ['running', 'failed'].includes(one.observedState) ? one : undefined;
      },
      `the machine of ${app} to run or fail`,
      90_000,
    );
    if (m.observedState === 'failed') expect(m.createError, 'a failed create').toBeTruthy();
  },
  async remove(_bed, { app }) {
    for (const m of (await bed.api('GET', `/v1/apps/${app}/machines`)).body) {
      expect((await bed.api('POST', `/v1/machines/${m.id}/destroy`)).status).toBeLessThan(300);
    }
    expect((await bed.api('DELETE', `/v1/apps/${app}`)).status).toBe(204);
  },
};

/**
 * A rolling deploy of an app whose one machine was made by hand (so no deploy passes the
 * armed points before the round's own). It must go live with one machine of the new
 * release, or end `error` with the old machine still there (unless its own create failed).
 */
const deployOperation: CrashOperation<{ app: string; deploy: string; old: string }> = {
  name: 'deploy',
  kinds: ['deploys.run'],
  async start() {
    const app = `crash-dp-${++rounds}`;
    expect((await bed.api('POST', '/v1/apps', { name: app })).status).toBe(201);
    // Not waited for: its create passes the machine points, which may be armed this round.
    const m = await bed.api('POST', `/v1/apps/${app}/machines?wait=false`, {
      image: web,
      killTimeoutS: 1,
    });
    expect(m.status, JSON.stringify(m.body)).toBe(202);
    const d = await bed.api('POST', `/v1/apps/${app}/deploys`, { image: web });
    expect(d.status, JSON.stringify(d.body)).toBe(202);
    return { app, deploy: d.body.id as string, old: m.body.id as string };
  },
  async settle(_bed, { app, deploy, old }) {
    const d = await waitUntil(
      async () => {
        const r = (await bed.api('GET', `/v1/deploys/${deploy}`)).body;
        return ['done', 'error'].includes(r.status) ? r : undefined;
      },
      `deploy ${deploy} to end`,
      120_000,
    );
    // A hand-made machine whose own create failed stays, as after any failed create.
    const machines = (await bed.api('GET', `/v1/apps/${app}/machines`)).body.filter(
      (m: { observedState: string }) => m.observedState !== 'failed',
    );
    if (d.status === 'error') {
      expect(d.error, 'a failed deploy').toBeTruthy();
      expect(machines.map((m: { id: string }) => m.id)).toEqual(machines.length ? [old] : []);
    } else {
      expect(machines).toHaveLength(1);
      expect(machines[0].id).not.toBe(old);
      const [release] = (await bed.api('GET', `/v1/apps/${app}/releases`)).body;
      expect(release).toMatchObject({ version: 1, status: 'live', deploy });
    }
  },
  async remove(_bed, { app }) {
    for (const m of (await bed.api('GET', `/v1/apps/${app}/machines`)).body) {
      expect((await bed.api('POST', `/v1/machines/${m.id}/destroy`)).status).toBeLessThan(300);
    }
    expect((await bed.api('DELETE', `/v1/apps/${app}`)).status).toBe(204);
  },
};

/**
 * A build whose RUN step runs a few seconds (its own app each round): killed at the job's
 * claim, while buildah runs (the builder's `building` point: buildah and its RUN container
 * outlive pier) and after its run. It must end `done`, or `failed` with a reason, and
 * leave no build directory, runc state, network, working container or process behind.
 */
const buildOperation: CrashOperation<{ app: string; appId: string; id: string }> = {
  name: 'build',
  kinds: ['builds.run'],
  async start() {
    const app = `crash-build-${++rounds}`;
    const made = await bed.api('POST', '/v1/apps', { name: app });
    expect(made.status).toBe(201);
    const tree = { Dockerfile: `FROM ${web}\nRUN sleep 15 && echo built > /built.txt\n` };
    const up = await uploadSource(bed.base, bed.token, app, sourceArchive(tree));
    expect(up.status, JSON.stringify(up.body)).toBe(201);
    const b = await bed.api('POST', `/v1/apps/${app}/builds`, { source: up.body.id });
    expect(b.status, JSON.stringify(b.body)).toBe(202);
    return { app, appId: made.body.id, id: b.body.id };
  },
  async settle(_bed, { appId, id }) {
    const b = await waitUntil(
      async () => {
        const r = await bed.api('GET', `/v1/builds/${id}`);
        return ['done', 'failed'].includes(r.body.state) ? r.body : undefined;
      },
      `the build ${id} to end`,
      120_000,
    );
    if (b.state === 'failed') expect(b.error, 'a failed build').toBeTruthy();
    const lower = id.toLowerCase();
    for (const dir of [`/var/tmp/pier-${lower}`, `/run/pier/build-runc/${lower}`]) {
      expect(
        await access(dir).then(
          () => dir,
          () => undefined,
        ),
        'left behind',
      ).toBeUndefined();
    }
    // Nor the network lent to it (a kill -9 mid-build leaves it to the next start).
    expect(await buildNetworkLeft(bed.dataDir, id), 'build network left').toEqual([]);
    // No working container of buildah left in the app's layer storage.
    const volume = (
      await pathsNamed(path.join(bed.dataDir, 'pool'), `b-${appId.toLowerCase()}`, 2)
    )[0];
    expect(volume, "the app's build cache").toBeDefined();
    const storage = ['--storage-driver', 'vfs', '--root', path.join(volume!, 'storage')];
    const runroot = ['--runroot', path.join(volume!, 'run')];
    const containers = await execFileP('buildah', [...storage, ...runroot, 'containers', '-q']);
    expect(containers.stdout.trim(), 'working containers').toBe('');
  },
  async remove(_bed, { app }) {
    expect((await bed.api('DELETE', `/v1/apps/${app}`)).status).toBe(204);
  },
};

const execFileP = promisify(execFile);

describe('kill -9 at every step', () => {
  it.skipIf(!canRunMachines)(
    'machines, deploys and builds: each runs or ends with its cause, leaving nothing',
    async () => {
      reports.push(
        ...(await crashAtEveryPoint(bed, [
          machineCreateOperation,
          deployOperation,
          buildOperation,
        ])),
      );
    },
    600_000,
  );

  it('buckets, webhooks, domains and billing finish or end with a reason, leaving nothing', async () => {
    reports.push(
      ...(await crashAtEveryPoint(bed, [
        bucketDeleteOperation,
        webhookDeliveryOperation,
        domainCheckOperation,
        billingBookingOperation,
      ])),
    );
  }, 600_000);

  it('databases: branch, fork and restore finish or end with a reason, leaving nothing', async () => {
    await createDatabase('source');
    await databaseSettles('source');
    reports.push(
      ...(await crashAtEveryPoint(bed, [
        restoreOperation,
        copyOperation('branch', 'source'),
        copyOperation('fork', 'source'),
      ])),
    );
    await deleteDatabase('source');
  }, 600_000);
});
