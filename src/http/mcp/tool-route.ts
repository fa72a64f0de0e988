/** The shape of an MCP tool: the `/v1` route it stands for and how its input fills it (tools.ts). */
import type { z } from 'zod';

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/** A route body that is not JSON (a source upload's archive: source-upload.ts). */
export interface RawBody {
  contentType: string;
  bytes: Buffer;
}

export interface ToolRoute {
  name: string;
  description: string;
  /** The route as registered, e.g. `GET /v1/apps/:name` (shown to clients and in docs). */
  route: `${HttpMethod} /v1/${string}`;
  input: z.ZodObject;
  /** Input fields that fill path parameters under another name (`{ name: 'database' }`). */
  params?: Record<string, string>;
  /** Input fields sent in the query string. */
  query?: string[];
  /** The one input field whose value is the whole body; otherwise the remaining fields are. */
  bodyField?: string;
  /** The body as raw bytes made from the input, for a route whose body is not JSON. */
  rawBody?: (input: Record<string, unknown>) => RawBody;
}
