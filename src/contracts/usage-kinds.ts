/**
 * The usage kinds pier meters and the operator prices (docs/billing.md), modelled on how
 * Fly bills machines (time, weighted by size) and Neon and S3 bill storage (GB-hours).
 * Only what pier can measure itself is a kind: it does not count network egress.
 * A GB here is a GiB (2^30 bytes), as volume and database sizes are.
 */
export const USAGE_KINDS = {
  machine_running_seconds: {
    unit: 'second',
    counts: 'seconds a machine runs, whatever its size',
  },
  machine_vcpu_seconds: {
    unit: 'vcpu-second',
    counts: 'running seconds times the machine’s vcpus',
  },
  machine_memory_gb_seconds: {
    unit: 'gb-second',
    counts: 'running seconds times the machine’s memory in GB (memoryMb / 1024)',
  },
  database_running_seconds: {
    unit: 'second',
    counts: 'seconds a database server is awake (not asleep or stopped), standby included',
  },
  database_memory_gb_seconds: {
    unit: 'gb-second',
    counts: 'awake seconds times the database’s memory in GB, standby included',
  },
  database_storage_gb_hours: {
    unit: 'gb-hour',
    counts: 'hours times the database’s sizeGb, standby included, awake or not',
  },
  volume_storage_gb_hours: {
    unit: 'gb-hour',
    counts: 'hours times the volume’s sizeGb (provisioned, as resized)',
  },
  bucket_storage_gb_hours: {
    unit: 'gb-hour',
    counts: 'hours times the bytes stored in the bucket’s objects, in GB',
  },
} as const;

export type UsageKind = keyof typeof USAGE_KINDS;
export const USAGE_KIND_NAMES = Object.keys(USAGE_KINDS) as UsageKind[];

export function isUsageKind(kind: string): kind is UsageKind {
  return Object.hasOwn(USAGE_KINDS, kind);
}
