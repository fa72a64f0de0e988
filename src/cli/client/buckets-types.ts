/** The shapes of the bucket answers the client reads (spec 2.7, 4.5). */

/** A bucket (spec 2.7). */
export interface Bucket {
  id: string;
  name: string;
  orgId: string;
  backendRef: string;
  createdAt: string;
}

/** The answer of `DELETE /v1/buckets/:name`. */
export interface DeletedBucket {
  destroyed: boolean;
  deletedObjects: number;
  detached: string[];
}

/** One object of a listing. */
export interface ObjectEntry {
  key: string;
  sizeBytes: number;
  lastModified: string;
}

/** One page of `GET /v1/buckets/:name/objects`. */
export interface ObjectPage {
  bucket: string;
  objects: ObjectEntry[];
  nextCursor?: string;
}

/** The answer of `DELETE /v1/buckets/:name/objects`. */
export interface DeletedObjects {
  bucket: string;
  deleted: string[];
}

/** A presigned URL; `requiredHeaders` must be sent exactly or the signature breaks. */
export interface Presigned {
  url: string;
  method: 'GET' | 'PUT';
  key: string;
  expiresAt: string;
  requiredHeaders: Record<string, string>;
}

/** One CORS rule, in S3's model. */
export interface CorsRule {
  id?: string;
  allowedMethods: string[];
  allowedOrigins: string[];
  allowedHeaders?: string[];
  exposeHeaders?: string[];
  maxAgeSeconds?: number;
}

/** The CORS configuration of a bucket, with the server's notes on rules that cannot match. */
export interface Cors {
  rules: CorsRule[];
  warnings?: string[];
}
