/**
 * Flags and environment → one validated config object. Nothing else in pier reads
 * `process.env`: everything that varies between installations arrives here, is checked
 * once, and is handed down explicitly (so a test can build many apps side by side).
 */
import path from 'node:path';
import { z } from 'zod';

const listenPattern = /^(?<host>\[[0-9a-fA-F:]+\]|[^:]+):(?<port>\d{1,5})$/;

export const configSchema = z.object({
  /** HOST:PORT of the API, console and object gateway. */
  listen: z.string().regex(listenPattern, 'must be HOST:PORT').default('127.0.0.1:8080'),
  /** Everything the platform keeps on disk lives under this directory. */
  dataDir: z.string().min(1).default('./.pier'),
  /**
   * Where the servers pier runs as other users keep their files (the embedded store, the
   * storage pool); absent = the data dir, or /var/lib/pier/servers-<hash> when other users
   * cannot enter the data dir (host/server-dir.ts).
   */
  serverDir: z.string().min(1).optional(),
  /** External PostgreSQL for the platform's own state; absent = embedded cluster in dataDir. */
  databaseUrl: z.string().url().optional(),
  /** Base of every URL the platform hands out; defaults to http://LISTEN. */
  publicUrl: z.string().url().optional(),
  /**
   * The domain apps' default addresses live under (`<app>.<apps domain>`), instead of the
   * public URL's host: a domain of their own keeps apps off the console's site, and so
   * off its cookies (docs/architecture.md, "Cookies"). Env `PIER_APPS_DOMAIN`.
   */
  appsDomain: z
    .string()
    .regex(
      /^(?=.{1,253}$)([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/i,
      'a DNS name',
    )
    .optional(),
  /** Bearer of the operator API; absent = generated into DATA_DIR/operator-token. */
  operatorToken: z.string().min(16).optional(),
  /**
   * Lets outbound calls made for customers (image pulls, token realms, redirects, later
   * webhooks and domain checks) reach loopback, private, link-local and metadata addresses;
   * off, the outbound guard (host/outbound-guard.ts) refuses them, against SSRF.
   */
  allowPrivateTargets: z.boolean().default(false),
  /**
   * Registries an operator trusts although they resolve to loopback or private addresses:
   * `HOST` (any port) or `HOST:PORT`, as image references name them (`registry.lan:5000`).
   * Their token realm and blob storage, when private too, must be named as well. Env
   * `PIER_TRUSTED_REGISTRIES`, comma-separated.
   */
  trustedRegistries: z
    .array(
      z
        .string()
        .regex(/^(?:\[[0-9a-fA-F:.]+\]|[^:[\]\s/,]+)(?::\d{1,5})?$/, 'must be HOST or HOST:PORT'),
    )
    .default([]),
  /**
   * Cap on what one image may unpack to, in GiB: the contents of its regular files (hard
   * links once, sparse files by their apparent size), counted while its layers stream; an
   * image past it fails the machine's create (`too-large`) and leaves nothing on disk.
   */
  imageMaxUnpackedGb: z.number().positive().max(1_000_000).default(10),
  /** Cap on the entries (files, directories, links) of one image, against inode bombs. */
  imageMaxEntries: z.number().int().positive().default(1_000_000),
  /** Cap on one image's compressed download (config and layers as declared), in GiB. */
  imageMaxDownloadGb: z.number().positive().max(1_000_000).default(5),
  /** Cap on one uploaded source archive (gzip'd tar, compressed bytes), in MiB: 413 `too-large`. */
  buildSourceMaxMb: z.number().positive().max(1_000_000).default(200),
  /** Cap on the entries of one source archive (and on its unpacked bytes: 10x the size cap). */
  buildSourceMaxFiles: z.number().int().positive().default(50_000),
  /** Wall-clock cap on one build, in seconds; past it the builder is killed and the build fails. */
  buildTimeoutS: z.number().int().positive().default(900),
  /** Memory of one build's RUN steps, in MiB. */
  buildMemoryMb: z.number().int().positive().default(2048),
  /** CPU cores one build's RUN steps may use. */
  buildCpus: z.number().positive().max(1024).default(1),
  /** Processes one build's RUN steps may hold at once (a fork bomb stops there). */
  buildPids: z.number().int().positive().default(1024),
  /** The newest releases of an app whose builds (and images) are kept for rollbacks. */
  releasesKept: z.number().int().min(1).max(1000).default(10),
  /** Disk of one app's builds (its layer cache and work), in GiB: a quota'd pool volume. */
  buildDiskGb: z.number().positive().max(1_000_000).default(10),
  /** Base images of the Dockerfiles detect generates, per builder (OCI references). */
  detectImages: z
    .object({
      static: z.string().min(1).default('docker.io/library/busybox:stable'),
      node: z.string().min(1).default('docker.io/library/node:20-slim'),
      python: z.string().min(1).default('docker.io/library/python:3.12-slim'),
      go: z.string().min(1).default('docker.io/library/golang:1.22'),
      goRuntime: z.string().min(1).default('gcr.io/distroless/static-debian12'),
    })
    .prefault({}),
  /** AES-256 master key for secrets, base64; absent = DATA_DIR/master.key (mode 0600). */
  masterKey: z.string().optional(),
  /** Region new organizations get when the operator names none. */
  region: z.string().min(2).max(12).default('local'),
  /** HOST:PORT where the SSH gateway listens (CONTRACT 8); port 0 = any free port (tests). */
  sshListen: z.string().regex(listenPattern, 'must be HOST:PORT').default('127.0.0.1:2222'),
  /**
   * Address of the SSH gateway handed to clients (host:port), where it is reached at
   * another address than it listens on (a port forwarded to it); absent = where it listens.
   */
  sshGatewayAddress: z.string().optional(),
  /**
   * OpenSSH public host key the gateway must serve with: a check, as the private half is
   * always DATA_DIR/ssh_host_ed25519_key (pier refuses to start when they differ).
   */
  sshHostKey: z.string().optional(),
  /** Directory of PostgreSQL server binaries for the embedded store; absent = found on the host. */
  pgBinDir: z.string().optional(),
  /** Unprivileged OS user that runs embedded servers when pier runs as root. */
  serviceUser: z.string().min(1).default('pier'),
  /**
   * Names of the OS users that managed database servers run as, one per database
   * (host/server-identities.ts): this prefix and a hash of the database id.
   */
  databaseUserPrefix: z
    .string()
    .regex(
      /^[a-z][a-z0-9-]{0,14}$/,
      'must be a lowercase user-name prefix of at most 15 characters',
    )
    .default('pierdb-'),
  /** Log level of pino. */
  logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /** How long a worker's claim on a job lasts without a heartbeat before another may take it. */
  jobLeaseMs: z.number().int().min(500).default(30_000),
  /** Jobs one replica's worker runs at once. */
  jobConcurrency: z.number().int().min(1).max(64).default(4),
  /** How often machines' internal ports are probed for `liveness`. */
  livenessIntervalMs: z.number().int().min(100).default(5000),
  /** Length of a billing window: usage is booked into the ledger once per window (docs/billing.md). */
  billingWindowSeconds: z.number().int().min(1).max(86_400).default(3600),
  /** How often running time and storage are recorded as usage. */
  meteringIntervalMs: z.number().int().min(100).default(60_000),
  /** Enables the Stripe payment provider (top-ups, auto-recharge, portal; docs/billing.md). */
  stripeSecretKey: z.string().min(1).optional(),
  /** Base URL the Stripe SDK talks to; absent = Stripe's API (tests: a local stand-in). */
  stripeApiUrl: z.string().url().optional(),
  /** Verifies the provider's signed events (`Stripe-Signature`) on POST /v1/billing/stripe/events. */
  stripeWebhookSecret: z.string().min(1).optional(),
  /** Where object bytes live: absent = DATA_DIR/objects; `s3://bucket/prefix?endpoint=…` = an S3 service. */
  objectStoreUrl: z.string().optional(),
  objectStoreAccessKeyId: z.string().optional(),
  objectStoreSecretAccessKey: z.string().optional(),
  /** Storage pool of customer data: btrfs when the host allows it (auto), or plain directories. */
  storagePool: z.enum(['auto', 'btrfs', 'directory']).default('auto'),
  /** Size of a new btrfs pool image, in GiB (sparse: it takes disk only as data arrives). */
  storagePoolGb: z.number().positive().max(1_000_000).default(64),
  /**
   * The point-in-time window of managed databases, in days: forks and restores reach
   * moments up to this far back, and the history only older moments need (WAL, base
   * backups) is pruned after each daily base backup. Fractions are allowed.
   */
  pitrWindowDays: z.number().positive().max(3650).default(7),
  /**
   * How long the key a device login hands out lives, in days (like a CLI's login token
   * elsewhere: it should not outlive the laptop it was typed on). Never past the key that
   * approved the login.
   */
  deviceKeyTtlDays: z.number().int().min(1).max(3650).default(90),
  /** Ports of managed databases' fronts (what customers connect to), as FROM-TO. */
  databasePorts: z
    .string()
    .regex(/^\d{1,5}-\d{1,5}$/, 'must be FROM-TO')
    .default('20000-29999'),
  /**
   * Database fronts serve anyone who reaches their port (as before issue 13). Off (the
   * default), a front serves only the host itself and the machines' network, and people
   * connect through the API's tunnel (`pier db connect`, engines/front/client-policy.ts).
   */
  publicDatabaseFronts: z.boolean().default(false),
  /** Public ports of apps' UDP endpoints (spec 4.6), as FROM-TO; bound on the listen host. */
  udpPorts: z
    .string()
    .regex(/^\d{1,5}-\d{1,5}$/, 'must be FROM-TO')
    .default('40000-40999'),
  /** UDP endpoints an organization may hold. */
  udpEndpointsPerOrg: z.number().int().min(0).max(10_000).default(10),
  /** The machines' private network: a bridge of this name with this IPv4 network. */
  machinesBridge: z
    .string()
    .regex(
      /^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,14}$/,
      'must be an interface name of at most 15 characters',
    )
    .default('pier0'),
  machinesCidr: z
    .string()
    .regex(/^\d{1,3}(\.\d{1,3}){3}\/\d{1,2}$/, 'must be an IPv4 network such as 10.213.0.0/16')
    .default('10.213.0.0/16'),
  /**
   * The OCI runtime new machine starts use: `runc` (host kernel, namespaces, seccomp) or
   * `runsc` (gVisor: a user-space kernel between the machine and the host's; stronger,
   * dearer per system call; see docs/architecture.md, Isolation model). Machines already
   * running keep theirs until they next start.
   */
  machineRuntime: z.enum(['runc', 'runsc']).default('runc'),
  /**
   * The address machines use to reach the platform's services (database fronts, the
   * services listener below): the host in every URL injected into machines by attachments.
   * Absent = the gateway of `machinesCidr` (the host's address on the machines' bridge).
   * Name it (an address or DNS name) when machines on other hosts must reach it too.
   */
  servicesHost: z.string().min(1).optional(),
  /**
   * TCP port of the services listener: the API and S3 gateway over TLS (platform CA) for
   * machines, at `https://SERVICES_HOST:PORT`. 0 = any free port (tests).
   */
  servicesPort: z.number().int().min(0).max(65535).default(8443),
  /**
   * Webhook deliveries (docs/webhooks.md): how long one attempt may take (connect, answer
   * and the small prefix of the body that is read), and a factor on the retry schedule's
   * delays (5 s, 5 min, 30 min, …): tests set it small, 1 is the schedule as documented.
   */
  webhookTimeoutMs: z.number().int().min(100).max(120_000).default(15_000),
  webhookRetryScale: z.number().positive().max(1).default(1),
  /** Attempts one replica runs at once. */
  webhookConcurrency: z.number().int().min(1).max(1000).default(64),
  /** HOST:PORT of the TLS edge for app traffic (SNI, custom domains, zones); absent = none. */
  tlsListen: z.string().regex(listenPattern, 'must be HOST:PORT').optional(),
  /** Where customers point their DNS records (shown in domain and zone answers); absent = public host. */
  edgeAddress: z.string().min(1).optional(),
  /** The ACME directory certificates come from (CONTRACT 6). */
  acmeDirectoryUrl: z.string().url().default('https://acme-v02.api.letsencrypt.org/directory'),
  /** A PEM bundle trusted, on top of the system's, when talking to the ACME server. */
  acmeCaFile: z.string().min(1).optional(),
  /** The ACME account's contact. */
  acmeEmail: z.string().email().optional(),
  /** HOST:PORT of the DNS server domain and zone checks ask; absent = the system resolver. */
  dnsResolver: z.string().regex(listenPattern, 'must be HOST:PORT').optional(),
  /**
   * HOST:PORT (UDP) of pier's own DNS server for `acme.<edge host>`, where zones delegate
   * `_acme-challenge` (edge/acme-dns.ts); absent = no zones (503 `zones-unavailable`).
   */
  dnsListen: z.string().regex(listenPattern, 'must be HOST:PORT').optional(),
  /** Largest JSON body accepted by ordinary routes. */
  bodyLimitBytes: z
    .number()
    .int()
    .min(1024)
    .default(1024 * 1024),
});

export type ConfigInput = z.input<typeof configSchema>;
export type Config = z.output<typeof configSchema> & {
  publicUrl: string;
  servicesHost: string;
  dataDir: string;
  listenHost: string;
  listenPort: number;
  /** Whether publicUrl was given (else it follows the listener, even a port chosen at 0). */
  publicUrlGiven: boolean;
  /** Port of the TLS edge once it listens (HTTPS URLs of redirects); undefined = no edge. */
  tlsPublicPort?: number;
};

/** Validates a partial config and fills in what derives from other fields. */
export function resolveConfig(input: ConfigInput): Config {
  const parsed = configSchema.safeParse(input);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message}`);
    throw new Error(`invalid configuration:\n${lines.join('\n')}`);
  }
  const c = parsed.data;
  const m = listenPattern.exec(c.listen);
  const listenHost = (m?.groups?.host ?? '127.0.0.1').replace(/^\[|\]$/g, '');
  const listenPort = Number(m?.groups?.port ?? 8080);
  const hostForUrl = urlHost(listenHost);
  return {
    ...c,
    dataDir: path.resolve(c.dataDir),
    ...(c.serverDir ? { serverDir: path.resolve(c.serverDir) } : {}),
    listenHost,
    listenPort,
    publicUrl: (c.publicUrl ?? `http://${hostForUrl}:${listenPort}`).replace(/\/+$/, ''),
    publicUrlGiven: c.publicUrl !== undefined,
    servicesHost: c.servicesHost ?? firstHostOf(c.machinesCidr),
  };
}

/** `HOST:PORT` of a listen setting → host (IPv6 without brackets) and port. */
export function splitListen(listen: string): { host: string; port: number } {
  const m = listenPattern.exec(listen);
  return {
    host: (m?.groups?.host ?? '127.0.0.1').replace(/^\[|\]$/g, ''),
    port: Number(m?.groups?.port ?? 0),
  };
}

/** `host` as a URL names it: an IPv6 address in brackets, anything else as it is. */
export function urlHost(host: string): string {
  return host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
}

/** Base URL of the services listener as machines dial it (the S3 endpoint is under it). */
export function servicesUrl(config: Pick<Config, 'servicesHost' | 'servicesPort'>): string {
  return `https://${urlHost(config.servicesHost)}:${config.servicesPort}`;
}

/**
 * The first host address of an IPv4 network (`10.213.0.0/16` → `10.213.0.1`): the
 * bridge's gateway, as the sandbox network assigns it (runtime/sandbox/cidr.ts gatewayOf,
 * which this foundation cannot import).
 */
function firstHostOf(cidr: string): string {
  const [a = 0, b = 0, c = 0, d = 0] = (cidr.split('/')[0] ?? '').split('.').map(Number);
  const n = (((a << 24) >>> 0) + (b << 16) + (c << 8) + d + 1) >>> 0;
  return [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');
}

/** The environment twins of the `pier serve` flags (CONTRACT 1), plus pier's own extras. */
export function configFromEnv(env: NodeJS.ProcessEnv): ConfigInput {
  const pick = (name: string) =>
    env[name] === undefined || env[name] === '' ? undefined : env[name];
  const num = (name: string) => (pick(name) === undefined ? undefined : Number(pick(name)));
  return {
    listen: pick('PIER_LISTEN'),
    dataDir: pick('PIER_DATA_DIR'),
    serverDir: pick('PIER_SERVER_DIR'),
    databaseUrl: pick('PIER_DATABASE_URL'),
    publicUrl: pick('PIER_PUBLIC_URL'),
    appsDomain: pick('PIER_APPS_DOMAIN'),
    operatorToken: pick('PIER_OPERATOR_TOKEN'),
    allowPrivateTargets: pick('PIER_ALLOW_PRIVATE_TARGETS') === '1',
    trustedRegistries: pick('PIER_TRUSTED_REGISTRIES')
      ?.split(',')
      .map((s) => s.trim())
      .filter(Boolean),
    imageMaxUnpackedGb: num('PIER_IMAGE_MAX_UNPACKED_GB'),
    imageMaxEntries: num('PIER_IMAGE_MAX_ENTRIES'),
    imageMaxDownloadGb: num('PIER_IMAGE_MAX_DOWNLOAD_GB'),
    buildSourceMaxMb: num('PIER_BUILD_SOURCE_MAX_MB'),
    buildSourceMaxFiles: num('PIER_BUILD_SOURCE_MAX_FILES'),
    buildTimeoutS: num('PIER_BUILD_TIMEOUT_S'),
    buildMemoryMb: num('PIER_BUILD_MEMORY_MB'),
    buildCpus: num('PIER_BUILD_CPUS'),
    buildPids: num('PIER_BUILD_PIDS'),
    releasesKept: num('PIER_RELEASES_KEPT'),
    buildDiskGb: num('PIER_BUILD_DISK_GB'),
    detectImages: {
      static: pick('PIER_DETECT_IMAGE_STATIC'),
      node: pick('PIER_DETECT_IMAGE_NODE'),
      python: pick('PIER_DETECT_IMAGE_PYTHON'),
      go: pick('PIER_DETECT_IMAGE_GO'),
      goRuntime: pick('PIER_DETECT_IMAGE_GO_RUNTIME'),
    },
    masterKey: pick('PIER_MASTER_KEY'),
    region: pick('PIER_REGION'),
    sshListen: pick('PIER_SSH_LISTEN'),
    sshGatewayAddress: pick('PIER_SSH_GATEWAY_ADDRESS'),
    sshHostKey: pick('PIER_SSH_HOST_KEY'),
    pgBinDir: pick('PIER_PG_BIN_DIR'),
    serviceUser: pick('PIER_SERVICE_USER'),
    databaseUserPrefix: pick('PIER_DATABASE_USER_PREFIX'),
    logLevel: pick('PIER_LOG_LEVEL') as ConfigInput['logLevel'],
    jobLeaseMs: num('PIER_JOB_LEASE_MS'),
    jobConcurrency: num('PIER_JOB_CONCURRENCY'),
    livenessIntervalMs: num('PIER_MACHINE_LIVENESS_MS'),
    billingWindowSeconds: num('PIER_BILLING_WINDOW_SECONDS'),
    meteringIntervalMs: num('PIER_METERING_INTERVAL_MS'),
    stripeSecretKey: pick('PIER_STRIPE_SECRET_KEY'),
    stripeApiUrl: pick('PIER_STRIPE_API_URL'),
    stripeWebhookSecret: pick('PIER_STRIPE_WEBHOOK_SECRET'),
    objectStoreUrl: pick('PIER_OBJECT_STORE_URL'),
    storagePool: pick('PIER_STORAGE_POOL') as ConfigInput['storagePool'],
    storagePoolGb: num('PIER_STORAGE_POOL_GB'),
    pitrWindowDays: num('PIER_PITR_WINDOW_DAYS'),
    deviceKeyTtlDays: num('PIER_DEVICE_KEY_TTL_DAYS'),
    databasePorts: pick('PIER_DATABASE_PORTS'),
    publicDatabaseFronts: pick('PIER_PUBLIC_DATABASE_FRONTS') === '1',
    udpPorts: pick('PIER_UDP_PORTS'),
    udpEndpointsPerOrg: num('PIER_UDP_ENDPOINTS_PER_ORG'),
    machinesBridge: pick('PIER_MACHINES_BRIDGE'),
    machinesCidr: pick('PIER_MACHINES_CIDR'),
    machineRuntime: pick('PIER_MACHINE_RUNTIME') as ConfigInput['machineRuntime'],
    servicesHost: pick('PIER_SERVICES_HOST'),
    servicesPort: num('PIER_SERVICES_PORT'),
    webhookTimeoutMs: num('PIER_WEBHOOK_TIMEOUT_MS'),
    webhookRetryScale: num('PIER_WEBHOOK_RETRY_SCALE'),
    webhookConcurrency: num('PIER_WEBHOOK_CONCURRENCY'),
    objectStoreAccessKeyId: pick('PIER_OBJECT_STORE_ACCESS_KEY_ID'),
    tlsListen: pick('PIER_TLS_LISTEN'),
    edgeAddress: pick('PIER_EDGE_ADDRESS'),
    acmeDirectoryUrl: pick('PIER_ACME_DIRECTORY_URL'),
    acmeCaFile: pick('PIER_ACME_CA_FILE'),
    acmeEmail: pick('PIER_ACME_EMAIL'),
    dnsResolver: pick('PIER_DNS_RESOLVER'),
    dnsListen: pick('PIER_DNS_LISTEN'),
    objectStoreSecretAccessKey: pick('PIER_OBJECT_STORE_SECRET_ACCESS_KEY'),
  };
}

/** Drops undefined entries so that flags only override the env where they were given. */
export function mergeConfig(...parts: ConfigInput[]): ConfigInput {
  const out: Record<string, unknown> = {};
  for (const part of parts) {
    for (const [k, v] of Object.entries(part)) if (v !== undefined) out[k] = v;
  }
  return out as ConfigInput;
}
