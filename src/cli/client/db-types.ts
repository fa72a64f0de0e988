/** The shapes of the database answers the client reads (spec 2.4, 2.5, 4.3). */

/** A database record; it never carries a URL or password. */
export interface Database {
  name: string;
  orgId: string;
  kind: 'postgres' | 'redis';
  port: number;
  /** The managed secret an attached app receives (DATABASE_URL or REDIS_URL). */
  secretKey: string;
  durability: 'standard' | 'host-redundant' | 'zone-redundant';
  createdAt: string;
  state: 'restoring' | 'ready' | 'failed';
  stateReason?: string;
  sourceName?: string;
  sourceAsOf?: string;
  copyKind?: 'fork' | 'branch';
  ephemeral?: true;
  ephemeralNote?: string;
  suspendPolicy?: {
    mode: 'suspend' | 'stop' | 'off';
    idleSeconds: number;
    stopAfterSeconds?: number;
  };
  expiresAt?: string;
  memoryMb: number;
  sizeGb: number;
  persistent: boolean;
  locale?: string;
  host: string;
  power: 'running' | 'suspended' | 'stopped';
  primaryMachineId?: string;
  standbyMachineId?: string;
}

/** The creation answer: the record plus its URL, shown only here. */
export interface CreatedDatabase extends Database {
  url: string;
}

/** The answer of a restore: the database, restoring, and where its old state is kept. */
export interface RestoringDatabase extends Database {
  preservedUnderName: string;
}

/** The one-time answer of `POST /v1/resources/:name/url`. */
export interface CopyUrl {
  name: string;
  url: string;
}
