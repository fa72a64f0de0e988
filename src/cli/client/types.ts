/** The shapes of the API answers the client reads (spec 2.1, 2.2, 2.8, 4.1, 4.10; CONTRACT 3). */

/** An agent token's block (spec 2.1). */
export interface AgentBlock {
  class: 'sandbox' | 'twin' | 'production';
  apps?: string[];
  prodDataRead?: boolean;
}

/** An API key record, never with its value (spec 2.1). */
export interface TokenRecord {
  id: string;
  orgId: string;
  userId?: string;
  name: string;
  prefix: string;
  createdAt: string;
  lastUsedAt?: string;
  scopes?: string[];
  expiresAt?: string;
  expired?: boolean;
  agent?: AgentBlock;
}

/** The creation answer: the record plus the key itself, shown only here. */
export interface CreatedToken extends TokenRecord {
  token: string;
}

/** An SSH public key of the organization. */
export interface SshKey {
  id: string;
  name: string;
  type: string;
  bits: number;
  fingerprint: string;
  publicKey: string;
  userId?: string;
  createdAt: string;
}

/** An app (CONTRACT 3). */
export interface App {
  id: string;
  name: string;
  orgId: string;
  createdAt: string;
  defaultAddress: string;
}

/** A secret's name and metadata; values never come back (spec 2.8). */
export interface Secret {
  name: string;
  updatedAt: string;
  managed: boolean;
  managedReason?: 'attachment' | 'resource-password';
  build?: boolean;
}

/** The answer of `PUT /v1/apps/:name/secrets`. */
export interface PutSecretsAnswer {
  appName: string;
  staged: boolean;
  changed: string[];
  restarted: string[];
  secrets: Secret[];
}

/** The answer of `POST /v1/device/code` (spec 2.2). */
export interface DeviceCode {
  deviceCode: string;
  userCode: string;
  verificationUri: string;
  verificationUriComplete: string;
  expiresIn: number;
  interval: number;
}

/** The answer of `POST /v1/device/token` once approved (spec 2.2). */
export interface DeviceToken {
  token: string;
  org: { id: string; name: string };
}
