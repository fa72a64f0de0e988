/**
 * The composition root: takes a config, brings up the state store (embedded or
 * external), applies migrations, builds the services and the HTTP app, starts the job
 * worker, and listens. `close()` undoes it all in reverse order.
 */
import { followNetworkPolicies } from './services/apps/network-policy-apply.js';
import { startUdpRelays } from './services/apps/udp-relay.js';
import { chmod, mkdir } from 'node:fs/promises';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import pino, { type Logger } from 'pino';
import { servicesUrl, splitListen, urlHost, type Config } from './config.js';
import { platformCa } from './crypto/ca.js';
import { SecretBox, loadMasterKey } from './crypto/secret-box.js';
import { buildApp } from './http/app.js';
import { startServicesListener, type ServicesListener } from './http/services-listener.js';
import { redactingLogger } from './http/plugins/redact.js';
import type { AppDeps } from './http/deps.js';
import { JobCatalogue, type JobDefinition } from './jobs/catalogue.js';
import { housekeepingJobs, scheduleHousekeeping } from './jobs/housekeeping.js';
import { JobWorker } from './jobs/worker.js';
import { Authenticator } from './services/authenticator.js';
import { refreshAttachmentUrls } from './services/attachment-urls.js';
import { bucketJobs } from './services/buckets/jobs.js';
import { BucketCaches } from './services/buckets/caches.js';
import { LocalDatabaseRuntime } from './engines/local/database-runtime.js';
import { databaseJobs } from './services/databases/jobs.js';
import { previewJobs } from './services/previews/jobs.js';
import { schedulePreviewUpkeep } from './services/previews/remove.js';
import { databaseRuntimeEvents } from './services/databases/runtime-events.js';
import { volumeJobs } from './services/volumes/jobs.js';
import { machineJobs } from './services/machines/jobs.js';
import { takeBackMachines } from './services/machines/upkeep.js';
import { billingJobs, scheduleBilling } from './services/billing/jobs.js';
import { scheduleSupervision } from './services/machines/supervise.js';
import { scheduleMachineSleep } from './services/machines/sleep.js';
import { newMachineChanges } from './services/machines/state-events.js';
import { scheduleCheckpoints } from './services/machines/checkpoints.js';
import { scheduleLiveness } from './services/machines/liveness.js';
import { hostImageStore, hostRuntime } from './runtime/host-runtime.js';
import { LocalBuilder } from './runtime/builds/local-builder.js';
import { CgroupSet } from './host/cgroups/cgroup.js';
import { buildJobs } from './services/builds/jobs.js';
import { deployJobs } from './services/deploys/jobs.js';
import { scheduleDatabaseUpkeep, takeBackDatabases } from './services/databases/upkeep.js';
import { scheduleOrphanSweep } from './services/buckets/orphan-sweep.js';
import { blobStoreFromConfig } from './objects/blobs/config.js';
import type { Clock, ServiceContext } from './services/context.js';
import { RateLimiter } from './services/rate-limit.js';
import { PoolHandle } from './storage/pool-handle.js';
import { loadHostPrivateKey } from './ssh/host-key.js';
import { parseSshPublicKey } from './ssh/public-key.js';
import { startSshGateway } from './ssh-gateway/server.js';
import type { SshGateway } from './services/ssh.js';
import { openStore, type Store } from './store/db.js';
import { startEmbeddedCluster, type EmbeddedCluster } from './store/embedded.js';
import { migrate } from './store/migrate.js';
import { lockDataDir, type DataDirLock } from './host/data-dir-lock.js';
import { resolveServerDir } from './host/server-dir.js';
import { loadOperatorToken } from './host/operator-token.js';
import { OutboundGuard, type Resolver } from './host/outbound-guard.js';
import { WebhookDispatcher } from './services/webhooks/dispatcher.js';
import { webhookJobs } from './services/webhooks/jobs.js';
import { startTlsEdge } from './edge/tls-listener.js';
import { startAcmeDns } from './edge/acme-dns.js';
import { acmeTxtValues } from './services/domains/zones.js';
import { edgeAddressOf } from './services/domains/records.js';
import { alpnChallengeContext, contextFor } from './services/domains/certificates.js';
import { edgeJobs, scheduleEdgeChecks } from './services/domains/jobs.js';
import { startEdgeTable } from './services/domains/hosts.js';

export interface PlatformOptions {
  logger?: Logger;
  clock?: Clock;
  /** Extra job kinds (tests register their own). */
  jobs?: JobDefinition[];
  /** Extra route families (extensions; tests use it for probe routes). */
  extraRoutes?: AppDeps['extraRoutes'];
  /** How customer-directed calls (webhooks) resolve names; tests inject one. */
  resolve?: Resolver;
}

export interface Platform {
  config: Config;
  app: FastifyInstance;
  url: string;
  operatorToken: string;
  store: Store;
  ctx: ServiceContext;
  worker: JobWorker;
  close(): Promise<void>;
}

/**
 * Starts the SSH gateway on `PIER_SSH_LISTEN` with the host key of the data dir, and
 * answers what `GET /v1/ssh` and SSH tokens name: `PIER_SSH_GATEWAY_ADDRESS`, else where
 * it listens (the public host, when it listens on every address).
 */
async function startGateway(
  config: Config,
  deps: Parameters<typeof startSshGateway>[0],
): Promise<{ answer: SshGateway; close(): Promise<void> }> {
  const key = await loadHostPrivateKey(config.dataDir);
  const parsed = parseSshPublicKey(key.publicKey);
  if (
    config.sshHostKey &&
    parseSshPublicKey(config.sshHostKey).fingerprint !== parsed.fingerprint
  ) {
    throw new Error(
      `PIER_SSH_HOST_KEY is not the gateway's host key (${parsed.fingerprint}, ${path.join(config.dataDir, 'ssh_host_ed25519_key.pub')})`,
    );
  }
  const listen = splitListen(config.sshListen);
  const gateway = await startSshGateway(deps, { ...listen, hostKey: key.privateKey });
  const everywhere = ['0.0.0.0', '::', ''].includes(listen.host);
  const host = everywhere ? new URL(config.publicUrl).hostname : urlHost(listen.host);
  return {
    answer: {
      address: config.sshGatewayAddress ?? `${host}:${gateway.port}`,
      hostKey: parsed.normalized,
      fingerprint: parsed.fingerprint,
    },
    close: () => gateway.close(),
  };
}

export async function startPlatform(config: Config, opts: PlatformOptions = {}): Promise<Platform> {
  // Every log line of the platform (runtime, jobs, image pulls) goes through the redaction.
  const logger = redactingLogger(opts.logger ?? pino({ level: config.logLevel }));
  const undo: (() => Promise<void>)[] = [];
  const unwind = async () => {
    for (const step of undo.reverse())
      await step().catch((err) => logger.error({ err }, 'shutdown step failed'));
  };
  try {
    // 0711: the service user must pass through to its own store dir; listing stays closed.
    await mkdir(config.dataDir, { recursive: true, mode: 0o711 });
    await chmod(config.dataDir, 0o711);
    const lock: DataDirLock = await lockDataDir(config.dataDir);
    undo.push(() => lock.release());
    const serverDir = await resolveServerDir(config.dataDir, config.serverDir);
    if (serverDir !== config.dataDir) {
      logger.info(
        { dataDir: config.dataDir, serverDir },
        'other users cannot enter the data dir: the store and the storage pool live in the server dir',
      );
    }

    let url = config.databaseUrl;
    if (!url) {
      const cluster: EmbeddedCluster = await startEmbeddedCluster({
        dir: path.join(serverDir, 'store'),
        serviceUser: config.serviceUser,
        binDir: config.pgBinDir,
      });
      undo.push(() => cluster.stop());
      url = cluster.url;
      logger.info({ pgdata: cluster.dataDir, reused: !cluster.started }, 'embedded store ready');
    }
    const store = openStore(url, { max: 20 });
    undo.push(() => store.close());
    const applied = await migrate(store.pool);
    if (applied.length) logger.info({ applied }, 'migrations applied');

    const clock = opts.clock ?? (() => new Date());
    const box = new SecretBox(await loadMasterKey(config.dataDir, config.masterKey));
    const operatorToken = await loadOperatorToken(config.dataDir, config.operatorToken);
    const blobs = await blobStoreFromConfig({
      dataDir: config.dataDir,
      objectStoreUrl: config.objectStoreUrl,
      accessKeyId: config.objectStoreAccessKeyId,
      secretAccessKey: config.objectStoreSecretAccessKey,
      region: config.region,
    });
    const pool = new PoolHandle(
      serverDir,
      logger,
      config.storagePool === 'auto' ? undefined : config.storagePool,
      Math.round(config.storagePoolGb * 1024 ** 3),
    );
    undo.push(() => pool.close());
    // Before anything serves TLS or boots a machine: the CA, the server certificate for
    // every name clients dial (public host, services host), and the copy machines get.
    const tls = await platformCa(config);
    // Filled in below; jobs only run once the worker starts, after it is set.
    const late: { ctx?: ServiceContext; services?: ServicesListener } = {};
    const catalogue = new JobCatalogue([
      ...housekeepingJobs(store.db),
      ...bucketJobs(blobs),
      ...databaseJobs(() => late.ctx!),
      ...volumeJobs(() => late.ctx!),
      ...machineJobs(() => late.ctx!),
      ...buildJobs(() => late.ctx!),
      ...deployJobs(() => late.ctx!),
      ...previewJobs(() => late.ctx!),
      ...billingJobs(() => late.ctx!),
      ...webhookJobs(store.db),
      ...edgeJobs(() => late.ctx!),
      ...(opts.jobs ?? []),
    ]);
    const databases = new LocalDatabaseRuntime({
      config,
      pool,
      log: logger.child({ component: 'databases' }),
      // What the runtime observes (sleep, wake, failover) is written to the rows here.
      events: databaseRuntimeEvents({ db: store.db, jobs: catalogue }),
    });
    // Fronts close before the pool: servers keep running and are taken back next start.
    undo.push(() => databases.close());
    const authenticator = new Authenticator(store.db, clock, logger);
    await authenticator.start(store.pool);
    undo.push(() => authenticator.stop());
    // The S3 gateway's per-process caches (keys, CORS rules), dropped by changes here and,
    // through the authenticator's LISTEN, by changes on other replicas.
    const bucketCaches = new BucketCaches(authenticator);
    // Calls made for customers (webhook deliveries) reach only what the operator allows.
    const outbound = new OutboundGuard({
      allowPrivate: config.allowPrivateTargets,
      trusted: config.trustedRegistries,
      resolve: opts.resolve,
    });
    // One image store for machines and builds: pulls (base images too) go through the
    // registries, token realms and redirects the guard allows (docs: "Outbound calls").
    const images = (() => {
      const outbound = new OutboundGuard({
        allowPrivate: config.allowPrivateTargets,
        trusted: config.trustedRegistries,
      });
      const limits = {
        maxUnpackedBytes: Math.floor(config.imageMaxUnpackedGb * 2 ** 30),
        maxEntries: config.imageMaxEntries,
        maxDownloadBytes: Math.floor(config.imageMaxDownloadGb * 2 ** 30),
      };
      const log = logger.child({ component: 'machines' });
      const store = hostImageStore({ dataDir: config.dataDir, log, outbound, imageLimits: limits });
      return { outbound, limits, store };
    })();
    const machines = hostRuntime({
      dataDir: config.dataDir,
      pool,
      log: logger.child({ component: 'machines' }),
      network: { bridge: config.machinesBridge, cidr: config.machinesCidr },
      sandboxRuntime: config.machineRuntime,
      // Machines' egress: private ranges stay closed to them unless the operator opens them.
      walls: { allowPrivate: config.allowPrivateTargets },
      outbound: images.outbound,
      imageLimits: images.limits,
      images: images.store,
      platformCaFile: tls.publicCaFile,
      // The services listener binds the bridge's gateway once the bridge exists.
      onBridgeUp: async () => late.services?.bind(),
    });
    const ctx: ServiceContext = {
      db: store.db,
      clock,
      box,
      jobs: catalogue,
      config,
      log: logger,
      auth: authenticator,
      blobs,
      bucketCaches,
      databases,
      pool,
      memory: {
        machineChanges: newMachineChanges(),
        machineRequests: new Map(),
        machineCpuSeen: new Map(),
        machineInFlight: new Map(),
        execSessions: new Map(),
        checkpointsInFlight: new Set(),
      },
      outbound,
      machines,
      images: images.store,
      // Builds run on this host and put their images into the machines' image store.
      builder: new LocalBuilder({
        pool,
        cgroups: () => CgroupSet.detect(),
        images: images.store,
        log: logger.child({ component: 'builds' }),
        // RUN steps join a network the machines runtime lends, behind the machines' walls.
        network: (buildId) => machines.buildNetwork(buildId),
        limits: {
          timeoutS: config.buildTimeoutS,
          memoryMb: config.buildMemoryMb,
          cpus: config.buildCpus,
          pids: config.buildPids,
          diskGb: config.buildDiskGb,
        },
      }),
    };
    late.ctx = ctx;
    undo.push(async () => ctx.machines?.close?.());
    // One limiter for the API and the SSH gateway: their session starts share a window.
    const rateLimiter = new RateLimiter();
    // Closed before the machines (and again, first of all, below): its sessions' processes
    // are killed as it ends them.
    const gateway = await startGateway(config, {
      ctx,
      authenticator,
      rateLimiter,
      log: logger.child({ component: 'ssh' }),
    });
    undo.push(() => gateway.close());
    const app = await buildApp({
      config,
      ctx,
      authenticator,
      operatorToken,
      sshGateway: gateway.answer,
      logger,
      rateLimiter,
      pool,
      extraRoutes: opts.extraRoutes,
    });
    undo.push(() => closeApp(app));
    const stopEdgeTable = await startEdgeTable(ctx);
    undo.push(async () => stopEdgeTable());
    if (config.dnsListen) {
      // pier's own DNS for the zones' delegated `_acme-challenge` names (DNS-01).
      const dns = await startAcmeDns({
        ...splitListen(config.dnsListen),
        edgeHost: edgeAddressOf(config),
        upstream: config.dnsResolver,
        txtFor: (label) => acmeTxtValues(ctx, label),
      });
      undo.push(() => dns.close());
      logger.info({ port: dns.port }, 'the edge DNS is serving');
    }
    if (config.tlsListen) {
      // The TLS edge: app traffic over HTTPS, through the same proxy as the plain listener.
      const edge = await startTlsEdge({
        ...splitListen(config.tlsListen),
        contextFor: (name) => contextFor(ctx, name),
        challengeFor: (name) => alpnChallengeContext(ctx, name),
        onRequest: (req, res) => void app.appProxy.handle(req, res),
        onUpgrade: (req, socket, head) => void app.appProxy.upgrade(req, socket, head),
        onError: (err, servername) => logger.warn({ err, servername }, 'edge: no TLS context'),
      });
      undo.push(() => edge.close());
      config.tlsPublicPort = edge.port;
      logger.info({ port: edge.port }, 'the TLS edge is serving');
    }
    await app.listen({ host: config.listenHost, port: config.listenPort });
    const address = app.server.address();
    const port = typeof address === 'object' && address ? address.port : config.listenPort;
    if (config.listenPort === 0 && !config.publicUrlGiven) {
      // Port 0 (tests) is only known now; handed-out URLs must carry the real one.
      const u = new URL(config.publicUrl);
      u.port = String(port);
      config.publicUrl = u.toString().replace(/\/$/, '');
    }
    // Machines reach the API and the S3 gateway here (attachments inject its URL).
    const services = await startServicesListener(app, config, tls, logger);
    undo.push(() => services.close());
    late.services = services;
    config.servicesPort = services.port;
    const refreshed = await refreshAttachmentUrls(ctx);
    if (refreshed) logger.info({ refreshed }, 'attachment URLs follow the services settings');

    const worker = new JobWorker({
      db: store.db,
      pool: store.pool,
      catalogue,
      log: logger,
      leaseMs: config.jobLeaseMs,
      concurrency: config.jobConcurrency,
    });
    await worker.start();
    undo.push(() => worker.stop());
    const webhooks = new WebhookDispatcher({
      db: store.db,
      pool: store.pool,
      box,
      guard: outbound,
      log: logger.child({ component: 'webhooks' }),
      timeoutMs: config.webhookTimeoutMs,
      retryScale: config.webhookRetryScale,
      concurrency: config.webhookConcurrency,
    });
    await webhooks.start();
    undo.push(() => webhooks.stop());
    const stopSchedule = scheduleHousekeeping(store.db, catalogue, undefined, ['webhooks.prune']);
    undo.push(async () => stopSchedule());
    await takeBackDatabases(ctx);
    await takeBackMachines(ctx);
    const stopBilling = scheduleBilling(ctx);
    undo.push(async () => stopBilling());
    const stopSupervision = scheduleSupervision(ctx);
    undo.push(async () => stopSupervision());
    const stopMachineSleep = scheduleMachineSleep(ctx);
    undo.push(async () => stopMachineSleep());
    const stopCheckpoints = scheduleCheckpoints(ctx);
    undo.push(async () => stopCheckpoints());
    const stopLiveness = scheduleLiveness(ctx, config.livenessIntervalMs);
    undo.push(async () => stopLiveness());
    databases.startTickers();
    const stopUpkeep = scheduleDatabaseUpkeep(ctx);
    undo.push(async () => stopUpkeep());
    const stopPreviewUpkeep = schedulePreviewUpkeep(ctx);
    undo.push(async () => stopPreviewUpkeep());
    const stopOrphanSweep = scheduleOrphanSweep(ctx);
    undo.push(async () => stopOrphanSweep());
    const stopEdgeChecks = scheduleEdgeChecks(ctx);
    undo.push(async () => stopEdgeChecks());
    const stopPolicies = await followNetworkPolicies(ctx);
    undo.push(async () => stopPolicies());
    const udpRelays = await startUdpRelays(ctx, config.listenHost);
    undo.push(async () => udpRelays.stop());
    // At shutdown the gateway goes first: its sessions end at once, not after the API's
    // grace or the jobs in flight.
    undo.push(() => gateway.close());

    const base = `http://${urlHost(config.listenHost)}:${port}`;
    logger.info(
      { url: base, publicUrl: config.publicUrl, servicesUrl: servicesUrl(config) },
      'pier is serving',
    );
    let closed = false;
    return {
      config,
      app,
      url: base,
      operatorToken,
      store,
      ctx,
      worker,
      async close() {
        if (closed) return;
        closed = true;
        await unwind();
      },
    };
  } catch (err) {
    await unwind();
    throw err;
  }
}

/** How long a shutdown waits for requests in flight before it cuts their connections. */
const CLOSE_GRACE_MS = 5_000;

/**
 * Closes the API server: idle connections at once, requests in flight given a grace, then
 * cut (a client that never finishes its request, or a stream left open, would otherwise
 * hold a SIGTERM of `pier serve` for ever).
 */
async function closeApp(app: FastifyInstance): Promise<void> {
  const grace = setTimeout(() => app.server.closeAllConnections(), CLOSE_GRACE_MS);
  try {
    await app.close();
  } finally {
    clearTimeout(grace);
  }
}
