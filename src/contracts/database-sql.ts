/**
 * Running one SQL statement on a PostgreSQL database (`POST /v1/resources/:name/sql`, a
 * route of pier's design, docs/api.md): the request body and the answer. Values come
 * back as PostgreSQL prints them (text), so nothing is lost to JSON numbers.
 */
import { z } from 'zod';

/** Bounds of the body; the service applies the defaults. */
export const SQL_BOUNDS = {
  maxSqlChars: 100_000,
  maxParams: 1000,
  defaultTimeoutMs: 10_000,
  maxTimeoutMs: 30_000,
  defaultMaxRows: 1000,
  maxRows: 10_000,
};

export const sqlBody = z.strictObject({
  sql: z.string().min(1).max(SQL_BOUNDS.maxSqlChars),
  /** `$1`, `$2`… in order; arrays and objects would need a type, so only scalars. */
  params: z
    .array(z.union([z.string(), z.number(), z.boolean(), z.null()]))
    .max(SQL_BOUNDS.maxParams)
    .optional(),
  readOnly: z.boolean().optional(),
  timeoutMs: z.number().int().min(1).max(SQL_BOUNDS.maxTimeoutMs).optional(),
  maxRows: z.number().int().min(1).max(SQL_BOUNDS.maxRows).optional(),
});
export type SqlBody = z.infer<typeof sqlBody>;

export const sqlResult = z.object({
  /** The command tag's verb: SELECT, INSERT, UPDATE, CREATE… */
  command: z.string(),
  columns: z.array(z.object({ name: z.string(), type: z.string() })),
  /** Each row as an array in column order; a value is its text form, or null. */
  rows: z.array(z.array(z.string().nullable())),
  /** Rows the statement returned or touched (the command tag), even past the cap. */
  rowCount: z.number().int().nullable(),
  /** Rows were left out: past maxRows or the response's byte cap. */
  truncated: z.boolean(),
  readOnly: z.boolean(),
});
export type SqlResult = z.infer<typeof sqlResult>;
