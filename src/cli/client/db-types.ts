/**
 * The shapes of the database answers the client reads: the API's own records
 * (src/contracts/databases.ts; spec 2.4, 2.5, 4.3).
 */
export type {
  CopyUrl,
  CreatedDatabase,
  DatabaseRecord as Database,
  RestoringDatabase,
} from '../../contracts/databases.js';
