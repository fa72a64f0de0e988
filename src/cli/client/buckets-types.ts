/**
 * The shapes of the bucket answers the client reads: the API's own records
 * (src/contracts/buckets.ts; spec 2.7, 4.5).
 */
export type {
  Bucket,
  Cors,
  CorsRuleInput as CorsRule,
  DeletedBucket,
  DeletedObjects,
  ObjectEntry,
  ObjectPage,
  Presigned,
} from '../../contracts/buckets.js';
