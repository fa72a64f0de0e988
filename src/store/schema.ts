/**
 * Row types of the platform's own tables, as kysely sees them. Kept in step with
 * `migrations/*.sql` by hand; the integration tests exercise every table.
 */
import type { ColumnType, Generated } from 'kysely';
import type { SuspendPolicy } from '../host/sleep-policy.js';

type CreatedAt = ColumnType<Date, Date | string | undefined, never>;
type Timestamp = ColumnType<Date, Date | string, Date | string>;
type NullableTimestamp = ColumnType<
  Date | null,
  Date | string | null | undefined,
  Date | string | null
>;
/** numeric columns come back from pg as strings, which keeps micro-cents exact. */
type Numeric = ColumnType<string, string | bigint | number, string | bigint | number>;

export interface AgentBlock {
  class: 'sandbox' | 'twin' | 'production';
  apps?: string[];
  prodDataRead?: boolean;
}

export interface OrgsTable {
  id: string;
  name: string;
  region: string;
  prepaid: boolean;
  managed_by: string | null;
  suspended_at: NullableTimestamp;
  limit_apps: number | null;
  limit_computers: number | null;
  limit_databases: number | null;
  limit_machines: number | null;
  limit_memory_mb: number | null;
  limit_storage_gb: number | null;
  created_at: CreatedAt;
}

export interface UsersTable {
  id: string;
  org_id: string;
  email: string;
  role: 'admin' | 'member';
  password_hash: string | null;
  created_at: CreatedAt;
}

export interface ApiKeysTable {
  id: string;
  org_id: string;
  user_id: string | null;
  name: string;
  prefix: string;
  hash: Buffer;
  scopes: string[] | null;
  expires_at: NullableTimestamp;
  agent: ColumnType<AgentBlock | null, string | null, string | null>;
  console: Generated<boolean>;
  /** 'mcp': an OAuth access token, answered on /v1/mcp and its tool calls only. */
  audience: Generated<'mcp' | null>;
  created_at: CreatedAt;
  last_used_at: NullableTimestamp;
  revoked_at: NullableTimestamp;
}

export interface AgentActionsTable {
  id: string;
  org_id: string;
  token_id: string;
  method: string;
  route: string;
  path: string;
  app: string | null;
  verdict: 'allowed' | 'refused';
  code: string | null;
  request_id: string;
  at: CreatedAt;
}

export interface SshKeysTable {
  id: string;
  org_id: string;
  user_id: string | null;
  name: string;
  type: string;
  bits: number;
  fingerprint: string;
  public_key: string;
  created_at: CreatedAt;
}

export interface SshTokensTable {
  id: string;
  org_id: string;
  app_name: string;
  machine: string | null;
  prefix: string;
  hash: Buffer;
  expires_at: Timestamp;
  created_at: CreatedAt;
}

export interface DeviceLoginsTable {
  id: string;
  device_code_hash: Buffer;
  user_code: string;
  client: string | null;
  version: string | null;
  requested_from: string;
  requested_at: CreatedAt;
  expires_at: Timestamp;
  interval_s: number;
  last_polled_at: NullableTimestamp;
  state: Generated<'pending' | 'approved' | 'denied' | 'redeemed'>;
  org_id: string | null;
  user_id: string | null;
  approver_expires_at: NullableTimestamp;
}

export interface NamesTable {
  name: string;
  kind: string;
  org_id: string;
  created_at: CreatedAt;
}

export interface AppsTable {
  id: string;
  org_id: string;
  name: string;
  computer: Generated<boolean>;
  /** The branch whose push deploys the app; null: `main` or `master` (services/git). */
  git_production_branch: ColumnType<string | null, string | null | undefined, string | null>;
  /** Whether a push of another branch deploys its preview (else it is only stored). */
  git_branch_previews: Generated<boolean>;
  created_at: CreatedAt;
}

export interface SecretsTable {
  app_id: string;
  name: string;
  nonce: Buffer;
  ciphertext: Buffer;
  managed_reason: 'attachment' | 'resource-password' | null;
  build: boolean | null;
  updated_at: ColumnType<Date, Date | string | undefined, Date | string>;
}

export interface CreditAccountsTable {
  org_id: string;
  balance_micros: Generated<Numeric>;
  blocked_at: NullableTimestamp;
  warn_at_percent: Generated<number>;
  min_topup_cents: Generated<number>;
  reference_cents: Generated<number>;
  created_at: CreatedAt;
}

/** Tool calls through /v1/mcp per organization and minute (services/mcp-rate-limit.ts). */
export interface McpRateWindowsTable {
  org_id: string;
  window_start: Date;
  calls: number;
}

export interface LedgerEntriesTable {
  id: string;
  org_id: string;
  kind: 'topup' | 'usage' | 'grant' | 'refund' | 'adjustment';
  amount_micros: Numeric;
  reference: string | null;
  window_from: NullableTimestamp;
  window_to: NullableTimestamp;
  detail: string | null;
  at: CreatedAt;
  seq: Generated<number>;
}

export interface JobsTable {
  id: Generated<number>;
  kind: string;
  payload: ColumnType<unknown, string, string>;
  state: Generated<'queued' | 'running' | 'done' | 'failed'>;
  attempts: Generated<number>;
  max_attempts: number;
  run_at: ColumnType<Date, Date | string | undefined, Date | string>;
  locked_by: string | null;
  locked_until: NullableTimestamp;
  steps: ColumnType<Record<string, unknown>, string | undefined, string>;
  last_error: string | null;
  dedupe_key: string | null;
  created_at: CreatedAt;
  finished_at: NullableTimestamp;
}

export interface CorsRule {
  id?: string;
  allowedMethods: ('GET' | 'PUT' | 'POST' | 'DELETE' | 'HEAD')[];
  allowedOrigins: string[];
  allowedHeaders?: string[];
  exposeHeaders?: string[];
  maxAgeSeconds?: number;
}

export interface BucketsTable {
  id: string;
  org_id: string;
  name: string;
  backend_ref: string;
  cors: ColumnType<CorsRule[], string | undefined, string>;
  /** Stored bytes are booked as usage up to here (services/billing/meter-storage.ts). */
  metered_at: NullableTimestamp;
  created_at: CreatedAt;
}

export interface ObjectsTable {
  bucket_id: string;
  key: string;
  blob_id: string;
  size: ColumnType<number, number, number>;
  etag: string;
  content_type: string | null;
  metadata: ColumnType<Record<string, string>, string | undefined, string>;
  last_modified: ColumnType<Date, Date | string | undefined, Date | string>;
}

export interface MultipartUploadsTable {
  id: string;
  bucket_id: string;
  key: string;
  content_type: string | null;
  metadata: ColumnType<Record<string, string>, string | undefined, string>;
  created_at: CreatedAt;
}

export interface MultipartPartsTable {
  upload_id: string;
  part_number: number;
  blob_id: string;
  size: ColumnType<number, number, number>;
  etag: string;
  last_modified: ColumnType<Date, Date | string | undefined, Date | string>;
}

export interface S3KeysTable {
  id: string;
  org_id: string;
  bucket_id: string;
  purpose: 'presign' | 'attachment' | 'person';
  secret_nonce: Buffer;
  secret_ciphertext: Buffer;
  created_at: CreatedAt;
  revoked_at: NullableTimestamp;
  /** Reads only (GET, HEAD): a preview's keys (migration 0033). */
  read_only: Generated<boolean>;
}

export interface BucketAttachmentsTable {
  app_id: string;
  bucket_id: string;
  prefix: string;
  key_id: string;
  injected: string[];
  created_at: CreatedAt;
}

/** The sleep policy as stored (jsonb): the host's own shape. */
export type SuspendPolicyRow = SuspendPolicy;

export interface DatabasesTable {
  id: string;
  org_id: string;
  name: string;
  kind: 'postgres' | 'redis';
  host: string;
  port: number;
  memory_mb: number;
  size_gb: number;
  persistent: boolean;
  flush_interval_s: number | null;
  durability: Generated<'standard' | 'host-redundant'>;
  locale: string | null;
  suspend_policy: ColumnType<SuspendPolicyRow | null, string | null, string | null>;
  state: Generated<'restoring' | 'ready' | 'failed'>;
  state_reason: string | null;
  copy_kind: 'fork' | 'branch' | null;
  source_name: string | null;
  source_as_of: NullableTimestamp;
  ephemeral: Generated<boolean>;
  expires_at: NullableTimestamp;
  password_nonce: Buffer;
  password_ciphertext: Buffer;
  url_handed_out_at: NullableTimestamp;
  archive_id: string | null;
  power: Generated<'running' | 'suspended' | 'stopped'>;
  /** Storage and running time are booked as usage up to here (services/billing/meter-storage.ts). */
  metered_at: NullableTimestamp;
  created_at: CreatedAt;
}

export interface DatabaseInstancesTable {
  id: string;
  database_id: string;
  role: 'primary' | 'standby';
  volume: string;
  internal_port: number;
  created_at: CreatedAt;
}

export interface DatabaseArchivesTable {
  id: string;
  org_id: string;
  database_id: string | null;
  kind: 'postgres' | 'redis';
  source_volume: string | null;
  covers_until: NullableTimestamp;
  created_at: CreatedAt;
}

export interface DatabaseAttachmentsTable {
  app_id: string;
  database_id: string;
  secret_name: string;
  created_at: CreatedAt;
}

export interface VolumesTable {
  id: string;
  org_id: string;
  name: string;
  size_gb: number;
  mount_path: string;
  class: 'standard' | 'durable';
  flush_interval_s: number;
  pool_volume: string;
  app_id: string | null;
  machine_id: string | null;
  lease_host: string | null;
  lease_gen: Generated<number>;
  durable_gen: Generated<number>;
  durable_at: NullableTimestamp;
  wal_durable_at: NullableTimestamp;
  /** Storage is booked as usage up to here (services/billing/meter-storage.ts). */
  metered_at: NullableTimestamp;
  created_at: CreatedAt;
}

export interface MachinesTable {
  id: string;
  org_id: string;
  app_id: string;
  host: string;
  region: string;
  config: ColumnType<Record<string, unknown>, string, string>;
  desired_state: string;
  observed_state: string;
  private_ip: string | null;
  boot_ms: number | null;
  restarts: Generated<number>;
  volume_id: string | null;
  create_error: string | null;
  create_error_code: string | null;
  create_boot_log: string | null;
  create_warning: string | null;
  ready_at: NullableTimestamp;
  metered_at: NullableTimestamp;
  liveness: 'listening' | 'not-listening' | 'no-signal' | null;
  liveness_reason: string | null;
  liveness_since: NullableTimestamp;
  liveness_at: NullableTimestamp;
  /** When its newest checkpoint was taken (spec 2.11 checkpointAt). */
  checkpoint_at: NullableTimestamp;
  /** Last checkpoint number handed out; names checkpoint volumes on the host. */
  checkpoint_seq: Generated<number>;
  /** The release it belongs to (migration 0030); null when made outside deploys. */
  release_id: Generated<string | null>;
  /** Set while a deploy retires it: out of the proxy's routes, draining. */
  retiring_at: Generated<Date | null>;
  created_at: CreatedAt;
  updated_at: ColumnType<Date, Date | string | undefined, Date | string>;
}

export interface ExecSessionsTable {
  id: string;
  org_id: string;
  machine_id: string;
  key_id: string;
  agent: boolean;
  command: ColumnType<string[] | null, string | null, string | null>;
  tty: boolean;
  client_ip: string | null;
  host: string;
  pid: number | null;
  /** bigint: read back as a string. */
  pid_start: ColumnType<string | null, number | null, number | null>;
  started_at: CreatedAt;
  ended_at: NullableTimestamp;
  exit_code: number | null;
  exit_signal: string | null;
  end_reason: string | null;
}

export interface MachineCheckpointsTable {
  id: string;
  machine_id: string;
  org_id: string;
  label: string;
  seq: number;
  auto: Generated<boolean>;
  memory: Generated<boolean>;
  state: Generated<'creating' | 'ready'>;
  size_bytes: number | null;
  created_at: CreatedAt;
}

export interface UsageEventsTable {
  id: Generated<string>;
  org_id: string;
  kind: string;
  quantity: Numeric;
  subject: string | null;
  at: ColumnType<Date, Date | string | undefined, never>;
  /** Start of the interval the event measures (0023); null: an instant at `at`. */
  since: ColumnType<Date | null, Date | string | null | undefined, never>;
}

export interface OAuthClientsTable {
  id: string;
  client_name: string | null;
  redirect_uris: string[];
  grant_types: string[];
  response_types: string[];
  scope: string | null;
  registered_from: string;
  created_at: CreatedAt;
  /** When a person first approved the client; null: never (it counts toward the cap). */
  used_at: Generated<Date | null>;
}
export interface OAuthGrantsTable {
  id: string;
  org_id: string;
  user_id: string | null;
  client_id: string;
  client_name: string | null;
  verified: boolean;
  redirect_uri: string;
  scopes: string[];
  agent: ColumnType<AgentBlock, string, string>;
  created_at: CreatedAt;
  expires_at: Timestamp;
  revoked_at: NullableTimestamp;
  revoked_why: string | null;
}
export interface OAuthRequestsTable {
  id: string;
  client_id: string;
  client_name: string | null;
  verified: boolean;
  redirect_uri: string;
  code_challenge: string;
  state: string | null;
  scopes: string[];
  requested_from: string;
  created_at: CreatedAt;
  expires_at: Timestamp;
  status: Generated<'pending' | 'approved' | 'denied'>;
  org_id: string | null;
  grant_id: string | null;
  code_hash: Buffer | null;
  code_expires_at: NullableTimestamp;
  code_used_at: NullableTimestamp;
}
export interface OAuthRefreshTokensTable {
  hash: Buffer;
  grant_id: string;
  created_at: CreatedAt;
  spent_at: NullableTimestamp;
}
export interface OAuthGrantKeysTable {
  grant_id: string;
  key_id: string;
}
export interface EntranceRateWindowsTable {
  bucket: string;
  window_start: Timestamp;
  hits: number;
}

/** The operator's price lists, newest last (services/billing/prices.ts). */
export interface PriceListsTable {
  id: Generated<number>;
  prices: ColumnType<Record<string, number>, string, never>;
  decided_at: ColumnType<Date, Date | string | undefined, never>;
}

/** One row: usage before `booked_until` is booked (services/billing/booking.ts). */
export interface BillingCursorTable {
  id: Generated<boolean>;
  booked_until: ColumnType<Date, Date | string, Date | string>;
}

export interface WebhooksTable {
  id: string;
  org_id: string;
  url: string;
  events: string[];
  secret_nonce: Buffer;
  secret_ciphertext: Buffer;
  enabled: Generated<boolean>;
  disabled_reason: string | null;
  disabled_at: NullableTimestamp;
  created_at: CreatedAt;
}

export interface WebhookEventsTable {
  id: string;
  org_id: string;
  kind: string;
  /** The exact body every delivery of the event sends and signs. */
  payload: string;
  created_at: CreatedAt;
}

export interface WebhookDeliveriesTable {
  id: string;
  webhook_id: string;
  event_id: string;
  org_id: string;
  status: Generated<'pending' | 'succeeded' | 'failed' | 'cancelled'>;
  attempts: Generated<number>;
  next_attempt_at: NullableTimestamp;
  locked_by: string | null;
  locked_until: NullableTimestamp;
  response_status: number | null;
  error: string | null;
  created_at: CreatedAt;
  finished_at: NullableTimestamp;
}

export interface WebhookAttemptsTable {
  delivery_id: string;
  attempt: number;
  started_at: Timestamp;
  duration_ms: number;
  response_status: number | null;
  error: string | null;
  outcome: 'succeeded' | 'retry' | 'failed' | 'disabled';
  next_attempt_at: NullableTimestamp;
}

/** The organization's customer at the payment provider and its auto-recharge (services/payments/). */
export interface PaymentAccountsTable {
  org_id: string;
  customer_id: string | null;
  payment_method_id: string | null;
  recharge_enabled: Generated<boolean>;
  threshold_cents: Generated<number>;
  amount_cents: Generated<number>;
  cap_cents: Generated<number>;
  recharged_cents: ColumnType<string, string | number | undefined, string | number>;
  recharge_pending: Generated<boolean>;
  recharge_failed_at: NullableTimestamp;
}

/** Every top-up, checkout or auto-recharge, pending until paid or failed (services/payments/). */
export interface TopupsTable {
  id: string;
  org_id: string;
  amount_cents: number;
  origin: 'checkout' | 'auto-recharge';
  state: Generated<'pending' | 'paid' | 'failed'>;
  session_id: string | null;
  payment_intent_id: string | null;
  created_at: CreatedAt;
  settled_at: NullableTimestamp;
}

/** Provider events already handled, by the provider's event id (services/payments/events.ts). */
export interface ProviderEventsTable {
  id: string;
  type: string;
  received_at: CreatedAt;
}

export interface AppProtectionTable {
  app_id: string;
  mode: 'password' | 'signed';
  password_hash: string | null;
  secret_nonce: Buffer;
  secret_ciphertext: Buffer;
  updated_at: ColumnType<Date, Date | string | undefined, Date | string>;
}

export interface ProtectionLinksTable {
  id: string;
  app_id: string;
  label: string;
  expires_at: NullableTimestamp;
  created_at: CreatedAt;
}

export interface AppNetworkPolicyTable {
  app_id: string;
  bandwidth_mbit: number | null;
  new_connections_per_minute: number | null;
  reason: string | null;
  updated_at: ColumnType<Date, Date | string | undefined, Date | string>;
}

export interface UdpEndpointsTable {
  id: string;
  app_id: string;
  public_port: number;
  target_port: number;
  created_at: CreatedAt;
}

export interface BuildSourcesTable {
  id: string;
  org_id: string;
  app_id: string;
  size_bytes: Numeric;
  sha256: string;
  files: number;
  created_at: CreatedAt;
}

export interface BuildsTable {
  id: string;
  org_id: string;
  app_id: string;
  source_id: string;
  dockerfile: string | null;
  state: 'queued' | 'building' | 'done' | 'failed';
  builder: string | null;
  image_digest: string | null;
  start_command: string | null;
  internal_port: number | null;
  error: string | null;
  created_at: CreatedAt;
  started_at: NullableTimestamp;
  finished_at: NullableTimestamp;
}

export interface ReleasesTable {
  id: string;
  org_id: string;
  app_id: string;
  version: number;
  image: string;
  image_digest: string | null;
  build_id: string | null;
  config: ColumnType<Record<string, unknown>, string, string>;
  secret_names: Generated<string[]>;
  secrets_nonce: Buffer | null;
  secrets_sealed: Buffer | null;
  status: 'deploying' | 'live' | 'superseded' | 'failed';
  created_at: CreatedAt;
  live_at: NullableTimestamp;
}

export interface DeploysTable {
  id: string;
  org_id: string;
  app_id: string;
  status: 'pending' | 'running' | 'done' | 'error';
  image: string;
  config: ColumnType<Record<string, unknown>, string, string>;
  strategy: 'rolling' | 'immediate';
  release_id: string | null;
  rollback_of: number | null;
  rollback_release_id: string | null;
  machine_count: Generated<number | null>;
  step: string | null;
  error: string | null;
  created_at: CreatedAt;
  finished_at: NullableTimestamp;
}

export interface Database {
  machines: MachinesTable;
  machine_checkpoints: MachineCheckpointsTable;
  exec_sessions: ExecSessionsTable;
  usage_events: UsageEventsTable;
  volumes: VolumesTable;
  databases: DatabasesTable;
  database_instances: DatabaseInstancesTable;
  database_archives: DatabaseArchivesTable;
  database_attachments: DatabaseAttachmentsTable;
  buckets: BucketsTable;
  objects: ObjectsTable;
  multipart_uploads: MultipartUploadsTable;
  multipart_parts: MultipartPartsTable;
  s3_keys: S3KeysTable;
  bucket_attachments: BucketAttachmentsTable;
  orgs: OrgsTable;
  users: UsersTable;
  api_keys: ApiKeysTable;
  agent_actions: AgentActionsTable;
  ssh_keys: SshKeysTable;
  ssh_tokens: SshTokensTable;
  device_logins: DeviceLoginsTable;
  names: NamesTable;
  apps: AppsTable;
  secrets: SecretsTable;
  credit_accounts: CreditAccountsTable;
  ledger_entries: LedgerEntriesTable;
  price_lists: PriceListsTable;
  billing_cursor: BillingCursorTable;
  payment_accounts: PaymentAccountsTable;
  topups: TopupsTable;
  provider_events: ProviderEventsTable;
  jobs: JobsTable;
  mcp_rate_windows: McpRateWindowsTable;
  oauth_clients: OAuthClientsTable;
  oauth_grants: OAuthGrantsTable;
  oauth_requests: OAuthRequestsTable;
  oauth_refresh_tokens: OAuthRefreshTokensTable;
  oauth_grant_keys: OAuthGrantKeysTable;
  entrance_rate_windows: EntranceRateWindowsTable;
  webhooks: WebhooksTable;
  webhook_events: WebhookEventsTable;
  webhook_deliveries: WebhookDeliveriesTable;
  webhook_attempts: WebhookAttemptsTable;
  edge_zones: EdgeZonesTable;
  edge_domains: EdgeDomainsTable;
  edge_certificates: EdgeCertificatesTable;
  edge_acme_accounts: EdgeAcmeAccountsTable;
  edge_challenges: EdgeChallengesTable;
  app_protection: AppProtectionTable;
  protection_links: ProtectionLinksTable;
  app_network_policy: AppNetworkPolicyTable;
  udp_endpoints: UdpEndpointsTable;
  build_sources: BuildSourcesTable;
  builds: BuildsTable;
  releases: ReleasesTable;
  deploys: DeploysTable;
  previews: PreviewsTable;
  preview_databases: PreviewDatabasesTable;
}

/** A preview environment of an app (migration 0033). */
export interface PreviewsTable {
  id: string;
  org_id: string;
  app_id: string;
  name: string;
  preview_app_id: string | null;
  app_name: string;
  state: 'creating' | 'ready' | 'failed';
  state_reason: string | null;
  release_id: string | null;
  release_version: number | null;
  deploy_id: string | null;
  git_branch: string | null;
  expires_at: Timestamp;
  created_at: CreatedAt;
}

/** A database branch a preview made (migration 0033). */
export interface PreviewDatabasesTable {
  preview_id: string;
  source_id: string;
  source_name: string;
  database_id: string;
}

export type EdgeStatus = 'pending_dns' | 'verified' | 'cert_issued' | 'error';

/** Progress of a domain's or zone's checks (migration 0021). */
interface EdgeProgress {
  status: Generated<EdgeStatus>;
  error: string | null;
  attempts: Generated<number>;
  last_checked_at: NullableTimestamp;
  verified_at: NullableTimestamp;
  cert_issued_at: NullableTimestamp;
  cert_not_after: NullableTimestamp;
  next_check_at: NullableTimestamp;
  created_at: CreatedAt;
  /** Set when an unproven claim ended (lost to another org's proof, or expired; 0025). */
  ended_at: NullableTimestamp;
}

export interface EdgeZonesTable extends EdgeProgress {
  id: string;
  org_id: string;
  zone: string;
  acme_label: string;
}

export interface EdgeDomainsTable extends EdgeProgress {
  id: string;
  org_id: string;
  app_id: string;
  domain: string;
  proof: string;
  zone_id: string | null;
  redirect_to: string | null;
}

export interface EdgeCertificatesTable {
  name: string;
  key_nonce: Buffer;
  key_sealed: Buffer;
  chain_pem: string;
  /** SHA-256 of `chain_pem` (hex): what a replica's cached TLS context is checked against. */
  fingerprint: string;
  not_after: Timestamp;
  issued_at: CreatedAt;
}

export interface EdgeAcmeAccountsTable {
  directory_url: string;
  account_url: string;
  key_nonce: Buffer;
  key_sealed: Buffer;
  created_at: CreatedAt;
}

export interface EdgeChallengesTable {
  kind: 'http-01' | 'dns-01' | 'tls-alpn-01';
  /** HTTP-01: the token. DNS-01: `_acme-challenge.<name>`. TLS-ALPN-01: the name. */
  key: string;
  value: string;
  created_at: CreatedAt;
}
